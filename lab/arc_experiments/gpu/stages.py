"""The GPU stages by name (`collect`, what comes back of them: arc_experiments/gpu/collect.py)."""

from __future__ import annotations

from collections.abc import Callable

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
