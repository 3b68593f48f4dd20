"""The GPU stages by name, and `collect`: what a machine's stages measured, packed into a few files under OUT."""

from __future__ import annotations

import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from arc_experiments.gpu import collapse_stages as collapse
from arc_experiments.gpu import learning_stages as learning
from arc_experiments.gpu import measure_stages as measure
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
    "mismatch": measure.mismatch,
    "scheduling": measure.scheduling,
    "8b": measure.recipe_8b,
    "zero": measure.zero,
    "unsloth": measure.unsloth,
    "collapse": collapse.collapse,
    "collapse8b": collapse.collapse_8b,
    "speed": profile.speed,
    "profile": profile.profile,
}


def describe(name: str) -> str:
    """A stage's one-line description: its docstring's first sentence, at most 100 characters."""
    first = " ".join((STAGES[name].__doc__ or "").split()).split(". ")[0].rstrip(".")
    return first if len(first) <= 100 else first[:99] + "…"


_KEPT = (
    "logs/*.log",
    "learning/logs/*.log",
    "learning/results.json",
    "learning/*/trainer_state.json",
    "learning/*/run_summary.json",
    "learning/eval/*/metrics.json",
    "learning/eval/*/per_attempt.jsonl",
    "learning/sweep/*.json",
    "learning/sweep/*/trainer_state.json",
    "learning/sweep/*/run_summary.json",
    "runs/*/trainer_state.json",
    "runs/*/run_summary.json",
    "runs/*/*.jsonl",
)


def collect(ctx: Context, name: str) -> list[Path]:
    """The experiment's results.json, and one tarball of logs, trainer states, evaluation metrics and per-attempt
    files: what comes back from a machine (few files: transports limit how many)."""
    if ctx.dry_run:
        return []
    ctx.out.mkdir(parents=True, exist_ok=True)
    written = []
    if (ctx.learning / "results.json").exists():
        written.append(Path(shutil.copy(ctx.learning / "results.json", ctx.out / "results.json")))
    archive = ctx.out / f"{name}-logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for pattern in _KEPT:
            for path in sorted(ctx.work.glob(pattern)):
                tar.add(path, arcname=str(path.relative_to(ctx.work)))
    return [*written, archive]
