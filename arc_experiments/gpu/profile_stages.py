"""Step profiles on a GPU (benchmarks/profile_step.py): the learning step before and after a change (`speed`) and
for config variants that leave the loss unchanged (`profile`)."""

from __future__ import annotations

import os
from pathlib import Path

from arc_experiments.gpu.learning_stages import ensure_student
from arc_experiments.gpu.measure_stages import GRPO, PY, RECIPE_8B, shape_8b
from arc_experiments.gpu.runner import ROOT, Context, failed, run


def _profile(ctx: Context, name: str, tree: Path, limit: int, *train_args: str, torch_step: int | None = None) -> int:
    """benchmarks/profile_step.py of `tree` (this checkout, or an older one for a before/after) on one run."""
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
        env={"PYTHONPATH": path},
    )


def speed(ctx: Context) -> int:
    """The learning step before and after a change, one right after the other on this machine: the tree in
    .baseline/ (`git archive COMMIT | tar -x -C .baseline`) and this checkout; with --with-8b the 8B recipe too."""
    baseline = ROOT / ".baseline"
    if not (baseline / "arc_trl").is_dir() and not ctx.dry_run:
        raise SystemExit("speed: no .baseline/ tree (git archive COMMIT | tar -x -C .baseline)")
    student = str(ctx.learning / "student")
    codes = [ensure_student(ctx)]
    for tree_name, tree in (("baseline", baseline), ("after", ROOT)):
        codes.append(
            _profile(
                ctx,
                f"speed_06_{tree_name}",
                tree,
                300,
                "--config",
                GRPO,
                "--model_name_or_path",
                student,
                "--teacher_model",
                student,
                "--max_steps",
                str(ctx.steps or 6),
                "--seed",
                "0",
                "--collapse_guard",
                "off",
                "--learning_rate",
                "1e-5",
            )
        )
        codes.append(
            run(
                ctx,
                f"sandbox_lockstep_{tree_name}",
                300,
                [PY, "benchmarks/lockstep_sandbox_bench.py", "--code-root", str(tree)],
            )
        )
    if ctx.with_8b:
        code, model = shape_8b(ctx)
        codes.append(code)
        for tree_name, tree in (("baseline", baseline), ("after", ROOT)):
            codes.append(
                _profile(
                    ctx,
                    f"speed_8b_{tree_name}",
                    tree,
                    900,
                    "--config",
                    RECIPE_8B,
                    "--model_name_or_path",
                    model,
                    "--max_steps",
                    "3",
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
                )
            )
    return failed(*codes)


VARIANT_ARGS = {
    "mb32": ["--per_device_train_batch_size", "32", "--gradient_accumulation_steps", "2"],
    "mb64": ["--per_device_train_batch_size", "64", "--gradient_accumulation_steps", "1"],
    "sw16": ["--sandbox_workers", "16"],
    "tb32": ["--teacher_batch_size", "32"],
    "pe": ["--rollout_scheduling", "per_episode"],
    "nois": ["--vllm_importance_sampling_correction", "false"],
}


def profile(ctx: Context) -> int:
    """Sub-phase profiles of the 0.6B learning step for config variants that leave the loss unchanged (`--variants`:
    base, or parts joined by _: mb32, mb64, sw16, tb32, pe, nois); the teacher is the student's weights."""
    student, steps = str(ctx.learning / "student"), ctx.steps or 6
    codes = [ensure_student(ctx)]
    for variant in ctx.variants:
        parts = [p for p in variant.split("_") if p != "base"]
        unknown = [p for p in parts if p not in VARIANT_ARGS]
        if unknown:
            raise SystemExit(f"profile: unknown variant part(s) {unknown}; known: base, {', '.join(VARIANT_ARGS)}")
        extra = [arg for p in parts for arg in VARIANT_ARGS[p]]
        codes.append(
            _profile(
                ctx,
                f"profile_{variant}",
                ROOT,
                300,
                "--config",
                GRPO,
                "--model_name_or_path",
                student,
                "--teacher_model",
                student,
                "--max_steps",
                str(steps),
                "--seed",
                "0",
                "--collapse_guard",
                "off",
                *extra,
                torch_step=steps,
            )
        )
    return failed(*codes)
