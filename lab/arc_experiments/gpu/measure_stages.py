"""GPU measurements on the realistic policy (the SFT student of configs/gpu/learning) and on the 8B recipe's shape:
mismatch, scheduling, the 8B step, ZeRO launches, unsloth, the collapse guard, step profiles."""

from __future__ import annotations

import os
import sys

from arc_experiments.gpu.learning_stages import ensure_student
from arc_experiments.gpu.runner import Context, failed, run

PY = sys.executable
GRPO = "configs/gpu/learning/grpo-opd.yaml"
RECIPE_8B = "configs/qwen3-8b-1gpu-colocate.yaml"
HELDOUT = "synthetic:n=256,seed=1,difficulty=tiny,families=rotate+flip+transpose+mirror_concat+upscale+color_swap"


def train(ctx: Context, name: str, limit: int, *args: str) -> int:
    return run(ctx, name, limit, [PY, "-m", "arc_trl", "train", *args, "--output_dir", str(ctx.work / "runs" / name)])


def shape_8b(ctx: Context) -> tuple[int, str]:
    """A random-init model of the 8B shape (it writes no code: the recipe runs with benchmark_full_turns)."""
    path = ctx.work / "qwen3-8b"
    if path.exists() and not ctx.dry_run:
        return 0, str(path)
    return run(
        ctx,
        "build-8b",
        600,
        [PY, "-m", "arc_trl", "build-tiny-model", "--shape", "qwen3-8b", "--out", str(path), "--device", "cuda"],
    ), str(path)


def mismatch(ctx: Context) -> int:
    """Trainer/vLLM mismatch with LoRA r16, and with token-level IS correction, beside the full fine-tune."""
    common = [
        "--config",
        GRPO,
        "--model_name_or_path",
        str(ctx.learning / "student"),
        "--teacher_model",
        str(ctx.learning / "teacher"),
        "--max_steps",
        str(ctx.steps or 6),
        "--seed",
        "0",
    ]
    return failed(
        run(ctx, "policy-sft", ctx.limit, ctx.demo("--until", "teacher")) if not ctx.has_student() else 0,
        train(
            ctx,
            "mismatch-lora",
            280,
            *common,
            "--use_peft",
            "true",
            "--lora_r",
            "16",
            "--lora_alpha",
            "32",
            "--lora_target_modules",
            "all-linear",
            "--learning_rate",
            "1e-4",
        ),
        train(ctx, "mismatch-token", 280, *common, "--vllm_importance_sampling_mode", "token_truncate"),
    )


def scheduling(ctx: Context) -> int:
    """Lock-step vs per-episode rollouts vs one continuous batch, the policy on held-out synthetic tasks."""
    return failed(
        ensure_student(ctx),
        run(
            ctx,
            "scheduling",
            ctx.limit,
            [
                PY,
                "benchmarks/scheduling_bench.py",
                "--model",
                str(ctx.learning / "student"),
                "--mean-turn-tokens",
                "0",
                "--dataset",
                HELDOUT,
                "--prompt-template",
                "configs/demo/prompt.yaml",
                "--episodes",
                "64",
                "--max-turns",
                "3",
                "--tokens-per-turn",
                "256",
                "--max-completion-length",
                "768",
                "--dtype",
                "bfloat16",
                "--gpu-memory-utilization",
                "0.3",
                "--sandbox-workers",
                "8",
                "--repeats",
                "2",
                "--out",
                str(ctx.out / "scheduling.json"),
            ],
        ),
    )


def recipe_8b(ctx: Context) -> int:
    """configs/qwen3-8b-1gpu-colocate.yaml as written (6 turns x 768 tokens), every turn forced to its cap: peak memory
    and the step's parts; on out-of-memory the same batch in smaller micro-batches."""
    code, model = shape_8b(ctx)
    args = [
        "--config",
        RECIPE_8B,
        "--model_name_or_path",
        model,
        "--max_steps",
        str(ctx.steps or 3),
        "--report_to",
        "none",
        "--save_strategy",
        "no",
        "--benchmark_full_turns",
        "true",
        "--collapse_guard",
        "off",
        "--seed",
        "0",
    ]
    code = code or train(ctx, "8b-colocate", max(ctx.limit, 900), *args)
    if code and not ctx.dry_run:
        code = train(
            ctx,
            "8b-colocate-mb4",
            max(ctx.limit, 900),
            *args,
            "--per_device_train_batch_size",
            "4",
            "--gradient_accumulation_steps",
            "8",
        )
    return code


def zero(ctx: Context) -> int:
    """The trainer benchmark (same batch, every launch): 1 GPU; ZeRO-2/3 on 2 and 4 GPUs where present."""
    import torch

    small = [
        "--shape",
        "qwen3-0.6b",
        "--seq-len",
        "2048",
        "--global-batch",
        "16",
        "--micro-batch",
        "4",
        "--steps",
        "5",
        "--gradient-checkpointing",
    ]
    big = [
        "--shape",
        "qwen3-8b",
        "--lora",
        "--gradient-checkpointing",
        "--seq-len",
        "4096",
        "--global-batch",
        "16",
        "--micro-batch",
        "4",
        "--steps",
        "3",
    ]
    launch = [PY, "-m", "accelerate.commands.launch", "--config_file"]
    bench = "benchmarks/gpu_trainer_bench.py"
    codes = [
        run(
            ctx,
            "bench-1gpu",
            300,
            [*launch, "accelerate_configs/single_gpu.yaml", bench, *small, "--out", str(ctx.out / "bench_1gpu.json")],
            env={"CUDA_VISIBLE_DEVICES": "0"},
        )
    ]
    for n in (2, 4):
        if torch.cuda.device_count() < n and not ctx.dry_run:
            continue
        for z in ("zero2", "zero3"):
            codes.append(
                run(
                    ctx,
                    f"bench-{z}-x{n}",
                    300,
                    [
                        *launch,
                        f"accelerate_configs/{z}.yaml",
                        "--num_processes",
                        str(n),
                        bench,
                        *small,
                        "--out",
                        str(ctx.out / f"bench_{z}_x{n}.json"),
                    ],
                )
            )
        codes.append(
            run(
                ctx,
                f"bench-8b-zero3-x{n}",
                400,
                [
                    *launch,
                    "accelerate_configs/zero3.yaml",
                    "--num_processes",
                    str(n),
                    bench,
                    *big,
                    "--out",
                    str(ctx.out / f"bench_8b_lora_zero3_x{n}.json"),
                ],
            )
        )
    return failed(*codes)


def unsloth(ctx: Context) -> int:
    """unsloth vs plain PEFT on the student (needs unsloth's wheels in $WHEELS: benchmarks/unsloth_gpu.sh)."""
    env = {"RUNS": os.environ.get("RUNS", "peft_hf unsloth_hf"), "RUN_TIMEOUT": os.environ.get("RUN_TIMEOUT", "240")}
    return failed(
        ensure_student(ctx),
        run(
            ctx,
            "unsloth",
            ctx.limit,
            ["bash", "benchmarks/unsloth_gpu.sh", str(ctx.learning / "student"), str(ctx.out)],
            env=env,
        ),
    )
