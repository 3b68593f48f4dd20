"""Seed-aware intervals for held-out pass@1 figures: a t-style interval whose variance has a task part and a seed part.

A figure is a signed sum of arms, `sum_a w_a * mean_a`, where an arm is its runs x tasks (per run, a mapping task ->
value: an evaluation's per-task pass@1, or a run's per-task gain over the student build it started from) and `mean_a`
its mean over runs and tasks. Every run is scored on the same tasks, so the variance of the figure has two parts:

- task part: the variance over tasks of the per-task contrast `c_t = sum_a w_a * (mean of arm a's runs on task t)`,
  divided by the number of tasks T (tasks are paired across arms, so task difficulty cancels in differences);
  T - 1 degrees of freedom. It is what another draw of held-out tasks would change.
- seed part: the t-interval over seeds: per arm, the sample variance of its runs' means over tasks divided by its
  runs S_a (S_a - 1 degrees of freedom). It is what other training seeds would change. An arm with one run has no
  estimate of its own: when an arm of the figure has one run and `pooled` is given (`pooled_seed_variance`: the
  experiment's arms with at least two runs, assuming equal run-to-run variance), every arm of the figure takes the
  pooled variance (one part, its degrees of freedom); without it the one-run arms are listed in `seed_part_missing`
  and their run-to-run variance is not in the interval.

The run-by-task noise enters both parts (a run's mean carries it, and so does the per-task contrast): the variance is
conservative by that term, never below what the seeds or the tasks alone say. Interval: figure +- t_{(1 + confidence)
/ 2, df} * sqrt(task part + seed part), df by Welch-Satterthwaite over the parts. With few seeds and a seed part that
matters the t quantile is large (2 seeds: 12.7, 3 seeds: 4.30): the interval says how little a handful of training
runs pins down, where a percentile bootstrap over 3 seeds could never reach beyond their range. `task_only_ci` is the
same interval without the seed part (T - 1 degrees of freedom): what the held-out tasks alone say.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arc_experiments.learning.bootstrap import check_same_tasks
from arc_experiments.learning.student_t import t_quantile

PerTask = Mapping[str, float]
CONFIDENCE = 0.95
METHOD = ("t interval; variance = task part (variance over tasks of the per-task contrast / tasks) + seed part "
          "(variance of each arm's run means / its runs; an arm with one run: every arm of the figure takes the "
          "variance pooled over the experiment's arms with >= 2 runs); Welch-Satterthwaite degrees of freedom")


@dataclass(frozen=True)
class SeedVariance:
    """A run-to-run variance of an arm's mean pass@1 (or gain), with its degrees of freedom."""

    variance: float
    df: float


def _matrix(runs: Sequence[PerTask], tasks: list[str]) -> list[list[float]]:
    return [[float(run[t]) for t in tasks] for run in runs]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _var(values: Sequence[float]) -> float:
    """Sample variance (n - 1); 0 for a single value."""
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def run_mean_variance(runs: Sequence[PerTask]) -> SeedVariance | None:
    """The sample variance of the runs' means over tasks, with S - 1 degrees of freedom; None for fewer than two runs
    (not estimable)."""
    if len(runs) < 2:
        return None
    tasks = sorted(runs[0])
    return SeedVariance(_var([_mean(row) for row in _matrix(runs, tasks)]), len(runs) - 1)


def pooled_seed_variance(arms: Sequence[Sequence[PerTask]]) -> SeedVariance | None:
    """The run-to-run variance pooled over the arms with at least two runs (weighted by their degrees of freedom);
    None when no arm has two."""
    estimates = [v for v in (run_mean_variance(runs) for runs in arms) if v is not None]
    df = sum(v.df for v in estimates)
    return SeedVariance(sum(v.variance * v.df for v in estimates) / df, df) if estimates else None


def _bounds(mean: float, variance: float, df: float, confidence: float) -> list[float]:
    if variance <= 0:
        return [mean, mean]
    half = t_quantile((1 + confidence) / 2, df) * math.sqrt(variance)
    return [mean - half, mean + half]


def seed_interval(arms: Sequence[Sequence[PerTask]], weights: Sequence[float] | None = None,
                  pooled: SeedVariance | None = None, confidence: float = CONFIDENCE,
                  names: Sequence[str] | None = None) -> dict[str, Any]:
    """`sum_a weights[a] * mean_a` over `arms` (each a list of runs' per-task values; default weights: +1, -1, -1, ...)
    and its seed-aware interval (module docstring).

    Returns {"mean", "ci", "task_only_ci", "se", "df" (None: no variance), "n_tasks", "n_runs", "seed_part",
    "seed_part_missing", "confidence"}; `seed_part` per arm: "own (S runs)", "pooled (k df)" or "missing (one run)".
    ValueError for an arm without runs; TaskMismatchError naming the tasks of runs on other tasks than the first."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    names = list(names) if names is not None else [f"arm {i}" for i in range(len(arms))]
    weights = list(weights) if weights is not None else [1.0] + [-1.0] * (len(arms) - 1)
    if not arms or len(weights) != len(arms) or len(names) != len(arms):
        raise ValueError(f"{len(arms)} arm(s), {len(weights)} weight(s), {len(names)} name(s): give one of each")
    empty = [name for name, runs in zip(names, arms) if not runs]
    if empty:
        raise ValueError(f"{', '.join(empty)}: no run")
    first = arms[0][0]
    if not first:
        raise ValueError(f"{names[0]}: no tasks")
    for name, runs in zip(names, arms):
        for i, run in enumerate(runs):
            check_same_tasks(first, run, (f"{names[0]} run #0", f"{name} run #{i}"))
    tasks = sorted(first)
    n_tasks = len(tasks)
    per_task = [sum(w * _mean([float(run[t]) for run in runs]) for w, runs in zip(weights, arms)) for t in tasks]
    mean = _mean(per_task)
    task_part = _var(per_task) / n_tasks
    parts: list[tuple[float, float]] = [(task_part, n_tasks - 1)]
    own = [run_mean_variance(runs) for runs in arms]
    use_pool = pooled is not None and any(v is None for v in own)
    seed_part, missing = {}, []
    if use_pool:
        parts.append((pooled.variance * sum(w * w / len(runs) for w, runs in zip(weights, arms)), pooled.df))
    for name, w, runs, var in zip(names, weights, arms, own):
        if use_pool:
            seed_part[name] = f"pooled ({pooled.df:g} df)"
        elif var is not None:
            parts.append((w * w * var.variance / len(runs), var.df))
            seed_part[name] = f"own ({len(runs)} runs)"
        else:
            missing.append(name)
            seed_part[name] = "missing (one run)"
    variance = sum(v for v, _ in parts)
    denominator = sum(v * v / df for v, df in parts if v > 0)
    df = variance * variance / denominator if denominator > 0 else math.inf
    return {"mean": mean, "ci": _bounds(mean, variance, df, confidence),
            "task_only_ci": _bounds(mean, task_part, n_tasks - 1, confidence) if n_tasks > 1 else [mean, mean],
            "se": math.sqrt(variance), "df": None if math.isinf(df) else df, "n_tasks": n_tasks,
            "n_runs": [len(runs) for runs in arms],
            "seed_part": seed_part, "seed_part_missing": missing, "confidence": confidence}
