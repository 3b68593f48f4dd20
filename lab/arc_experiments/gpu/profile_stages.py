"""Step profiles on a GPU (benchmarks/profile_step.py): a step before and after a change (`speed`: the 0.6B learning
step, `speed-subject`: the learning subject's, `speed8b`: the 8B recipe's) and for config variants that leave the
loss unchanged (`profile`)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from arc_experiments.gpu.learning_stages import ensure_student
from arc_experiments.gpu.measure_stages import GRPO, PY, RECIPE_8B, shape_8b
from arc_experiments.gpu.runner import ROOT, Context, failed, run


def profile_run(ctx: Context, name: str, tree: Path, limit: int, *train_args: str, torch_step: int | None = None,
                env: dict[str, str] | None = None) -> int:
    """benchmarks/profile_step.py of `tree` (this checkout, or an older one for a before/after) on one run (`env`
    added to its environment)."""
    torch_profile = ["--torch-profile-step", str(torch_step)] if torch_step else []
    path = os.pathsep.join(
        [str(tree), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]]
    )
    return run(
        ctx,
        name,
        limit,
        [
            PY,
            "benchmarks/profile_step.py",
            "--out",
            str(ctx.out / f"{name}.json"),
            *torch_profile,
            "--",
            *train_args,
            "--output_dir",
            str(ctx.work / "runs" / name),
        ],
        cwd=tree,
        env={**(env or {}), "PYTHONPATH": path},
    )


BASELINE = ROOT / ".baseline"  # the tree before a change: git archive COMMIT | tar -x -C .baseline
SUBJECT_CONFIGS = "configs/gpu/smollm2"  # the learning subject: SmolLM2-135M-Instruct after SFT (docs/learning.md)


def _learning_step(ctx: Context, student: str, config: str, learning_rate: str | None = "1e-5") -> list[str]:
    """The learning config's step on `student` (the teacher: the student's own weights), seed 0; `learning_rate`
    None keeps the config's."""
    lr = ["--learning_rate", learning_rate] if learning_rate else []
    return ["--config", config, "--model_name_or_path", student, "--teacher_model", student,
            "--max_steps", str(ctx.steps or 6), "--seed", "0", "--collapse_guard", "off", *lr]


def recipe_8b_step(model: str, steps: int) -> list[str]:
    """configs/qwen3-8b-1gpu-colocate.yaml as written on the random 8B shape, every turn forced to its cap."""
    return ["--config", RECIPE_8B, "--model_name_or_path", model, "--max_steps", str(steps), "--report_to", "none",
            "--save_strategy", "no", "--benchmark_full_turns", "true", "--collapse_guard", "off", "--seed", "0"]


def _need_baseline(ctx: Context, stage: str) -> None:
    """Before any work: a before/after stage needs the tree before the change."""
    if not (BASELINE / "arc_trl").is_dir() and not ctx.dry_run:
        raise SystemExit(f"{stage}: no .baseline/ tree (git archive COMMIT | tar -x -C .baseline)")


def _before_after(ctx: Context, name: str, limit: int, train_args: list[str]) -> list[int]:
    """The same run from .baseline/ and from this checkout, one right after the other on this machine."""
    return [profile_run(ctx, f"{name}_{tree_name}", tree, limit, *train_args)
            for tree_name, tree in (("baseline", BASELINE), ("after", ROOT))]


def speed(ctx: Context) -> int:
    """The 0.6B learning step before and after a change, one right after the other on this machine: the tree in
    .baseline/ (`git archive COMMIT | tar -x -C .baseline`) and this checkout; the lock-step sandbox bench of each."""
    _need_baseline(ctx, "speed")
    codes = [ensure_student(ctx)]
    codes += _before_after(ctx, "speed_06", 300, _learning_step(ctx, str(ctx.learning / "student"), GRPO))
    for tree_name, tree in (("baseline", BASELINE), ("after", ROOT)):
        codes.append(run(ctx, f"sandbox_lockstep_{tree_name}", 300,
                         [PY, "benchmarks/lockstep_sandbox_bench.py", "--code-root", str(tree)]))
    return failed(*codes)


def speed_subject(ctx: Context) -> int:
    """The learning subject's step (configs/gpu/smollm2: the pretrained SmolLM2 after SFT, imported from its PyPI
    GGUF) before and after a change, as `speed` measures the 0.6B one."""
    _need_baseline(ctx, "speed-subject")
    subject = replace(ctx, configs=SUBJECT_CONFIGS)
    codes = [ensure_student(subject)]
    config = f"{SUBJECT_CONFIGS}/grpo-opd.yaml"
    codes += _before_after(ctx, "speed_subject", 300, _learning_step(ctx, str(subject.learning / "student"), config))
    return failed(*codes)


VARIANT_ARGS_8B = {
    "vllm55": ["--vllm_gpu_memory_utilization", "0.55"],
    "vllm60": ["--vllm_gpu_memory_utilization", "0.6"],
    "tb16": ["--teacher_batch_size", "16"],
}


def speed_8b(ctx: Context) -> int:
    """The 8B recipe's step before and after a change (.baseline/ and this checkout, 3 steps each), then this
    checkout with each of `--variants-8b` (parts joined by _: vllm55, vllm60, tb16), its 4th step under
    torch.profiler."""
    _need_baseline(ctx, "speed8b")
    variants = {variant: _variant_args(variant, VARIANT_ARGS_8B) for variant in ctx.variants_8b}  # unknown: stop now
    code, model = shape_8b(ctx)
    codes = [code, *_before_after(ctx, "speed_8b", 900, recipe_8b_step(model, 3))]
    for variant, extra in variants.items():
        codes.append(profile_run(ctx, f"speed_8b_{variant}", ROOT, 900, *recipe_8b_step(model, 4), *extra,
                                 torch_step=4))
    return failed(*codes)


def _variant_args(variant: str, known: dict[str, list[str]]) -> list[str]:
    """The flags of a variant (parts joined by _, `base` adds none); an unknown part stops the stage."""
    parts = [p for p in variant.split("_") if p != "base"]
    unknown = [p for p in parts if p not in known]
    if unknown:
        raise SystemExit(f"unknown variant part(s) {unknown} in {variant!r}; known: base, {', '.join(known)}")
    return [arg for p in parts for arg in known[p]]


VARIANT_ARGS = {
    "mb32": ["--per_device_train_batch_size", "32", "--gradient_accumulation_steps", "2"],
    "mb64": ["--per_device_train_batch_size", "64", "--gradient_accumulation_steps", "1"],
    "sw16": ["--sandbox_workers", "16"],
    "tb32": ["--teacher_batch_size", "32"],
    "pe": ["--rollout_scheduling", "per_episode"],
    "nois": ["--vllm_importance_sampling_correction", "false"],
    "nogc": ["--gradient_checkpointing", "false"],
}


def profile(ctx: Context) -> int:
    """Sub-phase profiles of the 0.6B learning step for config variants that leave the loss unchanged (`--variants`:
    base, or parts joined by _: mb32, mb64, sw16, tb32, pe, nois, nogc); the teacher is the student's weights."""
    student = str(ctx.learning / "student")
    variants = {variant: _variant_args(variant, VARIANT_ARGS) for variant in ctx.variants}  # unknown: stop now
    codes = [ensure_student(ctx)]
    for variant, extra in variants.items():
        step = _learning_step(ctx, student, GRPO, None)
        codes.append(profile_run(ctx, f"profile_{variant}", ROOT, 300, *step, *extra, torch_step=ctx.steps or 6))
    return failed(*codes)
