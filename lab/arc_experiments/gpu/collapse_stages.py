"""The collapse guard on a GPU: the 0.6B policy's step-2 collapse with the default guard and with rollback, a provoked
collapse, and one provoked rollback of the 8B recipe (time to recover, peak memory)."""

from __future__ import annotations

import shutil

from arc_experiments.gpu.learning_stages import ensure_student
from arc_experiments.gpu.measure_stages import GRPO, RECIPE_8B, shape_8b, train
from arc_experiments.gpu.runner import Context, failed


def collapse(ctx: Context) -> int:
    """The collapse guard on the 0.6B policy, GRPO only: the step-2 collapse of lr 1e-4 with the default guard, then
    with rollback; a provoked collapse (lr 1.0, weight decay 1.0) with and without rollback (peak memory)."""
    common = [
        "--config",
        GRPO,
        "--model_name_or_path",
        str(ctx.learning / "student"),
        "--teacher_backend",
        "none",
        "--teacher_tau",
        "0",
        "--seed",
        "0",
    ]
    provoked = [
        "--learning_rate",
        "1.0",
        "--weight_decay",
        "1.0",
        "--warmup_steps",
        "3",
        "--collapse_baseline_steps",
        "3",
        "--collapse_window",
        "1",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--save_total_limit",
        "2",
        "--max_steps",
        "6",
    ]
    codes = [
        ensure_student(ctx),
        train(ctx, "collapse-early-warn", 300, *common, "--learning_rate", "1e-4", "--max_steps", "5"),
        train(
            ctx,
            "collapse-early-rollback",
            420,
            *common,
            "--learning_rate",
            "1e-4",
            "--max_steps",
            "12",
            "--collapse_guard",
            "rollback",
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
        ),
        train(ctx, "collapse-provoked-warn", 300, *common, *provoked, "--collapse_guard", "warn"),
        train(ctx, "collapse-provoked-rollback", 400, *common, *provoked, "--collapse_guard", "rollback"),
    ]
    _keep_guard_logs(
        ctx, "collapse-early-warn", "collapse-early-rollback", "collapse-provoked-warn", "collapse-provoked-rollback"
    )
    return failed(*codes)


def collapse_8b(ctx: Context) -> int:
    """One provoked rollback of the 8B recipe (forced full turns): a rule that fires when the warm-up raises the
    learning rate at step 2 measures the mechanism (time to recover, peak memory), not the detector."""
    code, model = shape_8b(ctx)
    code = code or train(
        ctx,
        "collapse-8b-rollback",
        max(ctx.limit, 900),
        "--config",
        RECIPE_8B,
        "--model_name_or_path",
        model,
        "--max_steps",
        "4",
        "--report_to",
        "none",
        "--benchmark_full_turns",
        "true",
        "--seed",
        "0",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--collapse_guard",
        "rollback",
        "--collapse_max_rollbacks",
        "1",
        "--collapse_baseline_steps",
        "1",
        "--collapse_window",
        "1",
        "--collapse_min_signals",
        "1",
        "--collapse_thresholds",
        '{"learning_rate:up": {"change": "delta", "warn": 1e-12, "collapse": 1e-12}}',
    )
    _keep_guard_logs(ctx, "collapse-8b-rollback")
    return code


def _keep_guard_logs(ctx: Context, *runs: str) -> None:
    for name in runs:
        log = ctx.work / "runs" / name / "collapse_guard.jsonl"
        if log.exists():
            ctx.out.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, ctx.out / f"{name}.guard.jsonl")
