"""The GPU stages by name, and `collect`: what a machine's stages measured, packed into a few files under OUT."""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from arc_experiments.gpu import collapse_stages as collapse
from arc_experiments.gpu import fp8_stages as fp8
from arc_experiments.gpu import learning_stages as learning
from arc_experiments.gpu import measure_stages as measure
from arc_experiments.gpu import multigpu_stages as multigpu
from arc_experiments.gpu import opd_stages as opd
from arc_experiments.gpu import profile_stages as profile
from arc_experiments.gpu.runner import Context

Stage = Callable[[Context], int]

STAGES: dict[str, Stage] = {
    "learning": learning.learning,
    "policy": learning.policy,
    "student": learning.student,
    "control": learning.control,
    "teachers": learning.teachers,
    "pieces": learning.pieces,
    "seedpair": learning.seedpair,
    "sweep": learning.sweep,
    "temperature": learning.temperature,
    "arms": learning.arms,
    "arc-agi-1": learning.arc_agi_1,
    "opd-validation": opd.opd_validation,
    "opd-heldout": opd.opd_heldout,
    "mismatch": measure.mismatch,
    "scheduling": measure.scheduling,
    "8b": measure.recipe_8b,
    "zero": measure.zero,
    "unsloth": measure.unsloth,
    "collapse": collapse.collapse,
    "collapse8b": collapse.collapse_8b,
    "speed": profile.speed,
    "speed-subject": profile.speed_subject,
    "speed8b": profile.speed_8b,
    "profile": profile.profile,
    "multigpu": multigpu.multigpu,
    "drills": multigpu.drills,
    "server-learning": multigpu.server_learning,
    "fp8-8b": fp8.fp8_8b,
    "fp8-sync": fp8.fp8_sync,
    "fp8-profile": fp8.fp8_profile,
    "fp8-learning": fp8.fp8_learning,
    "fp8-learning-tis": fp8.fp8_learning_tis,
    "fp8-learning-all": fp8.fp8_learning_all,
}


def describe(name: str) -> str:
    """A stage's one-line description: its docstring's first sentence, at most 100 characters."""
    first = " ".join((STAGES[name].__doc__ or "").split()).split(". ")[0].rstrip(".")
    return first if len(first) <= 100 else first[:99] + "…"


def _kept(experiment: str) -> tuple[str, ...]:
    """What comes back, as patterns under WORK (`experiment`: the learning experiment's folder there)."""
    return (
        "logs/*.log",
        "logs/gpu_memory.csv",
        *(
            f"{experiment}/{pattern}"
            for pattern in (
                "logs/*.log",
                "results.json",
                "*/trainer_state.json",
                "*/run_summary.json",
                "eval/*/metrics.json",
                "eval/*/completions.jsonl",
                "eval/*/per_attempt.jsonl",
                "sweep/*.json",
                "sweep/*/trainer_state.json",
                "sweep/*/run_summary.json",
                "sweep/*/eval_arc/*.jsonl",
                "arms/*.json",
                "arms/*/config.yaml",
                "arms/*/trainer_state.json",
                "arms/*/run_summary.json",
                "arms/*/eval_arc/*.jsonl",
                "arc-agi-1/*/metrics.json",
                "arc-agi-1/*/completions.jsonl",
                "arc-agi-1/*/run_summary.json",
            )
        ),
        "runs/*/server_logs/*.log",
        "logs/gpu_peaks_*.csv",
        "drills/*.log",
        "runs/*/trainer_state.json",
        "runs/*/run_summary.json",
        "runs/*/*.jsonl",
    )


def collect(ctx: Context) -> list[Path]:
    """The experiment's results.json, and one tarball (OUT/logs.tar.gz, rewritten after each stage, so a machine
    taken back mid-queue leaves the stages before) of logs, GPU memory samples, trainer states, run summaries,
    evaluation metrics, completions and per-attempt files. With the stages' own outputs (profiles, benchmark JSONs)
    that is a few files under OUT: some ways of reaching a machine bring back only a few."""
    if ctx.dry_run:
        return []
    ctx.out.mkdir(parents=True, exist_ok=True)
    written = []
    if (ctx.learning / "results.json").exists():
        written.append(Path(shutil.copy(ctx.learning / "results.json", ctx.out / "results.json")))
    archive = ctx.out / "logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for pattern in _kept(ctx.learning.name):
            for path in sorted(ctx.work.glob(pattern)):
                tar.add(path, arcname=str(path.relative_to(ctx.work)))
    return [*written, archive]
