"""Bootstrap confidence intervals over tasks, for the pass@1 of one run (a sweep's recipe candidates,
sweep_choice.py), and the checks every per-task comparison shares.

The unit of resampling is the task: a task's attempts are correlated (the same model on the same grids), so resampling
attempts would understate the noise. An arm is given as its per-task pass@1 (the mean over a task's attempts of
"every test output correct", `per_task.py`); several mappings are pooled by averaging each task's pass@1 over them.
These intervals hold the runs fixed and cover the choice of tasks only: figures over several training runs take
seed_interval.py's, which add the seed-to-seed variance (a percentile bootstrap over 3 seeds could not reach beyond
their range).

- `paired_bootstrap(a, b)`: the difference `mean(a) - mean(b)` over the same tasks and its percentile interval, the
  same resampled tasks for both arms (a paired design: task difficulty cancels).
- `bootstrap_ci(a)`: one arm's mean pass@1 and its percentile interval.

Both are deterministic: numpy's PCG64 generator with a fixed seed, `n_resamples` resamples (default 10,000).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PerTask = Mapping[str, float]
N_RESAMPLES = 10_000
CONFIDENCE = 0.95
SEED = 0


class TaskMismatchError(ValueError):
    """Two result sets that must cover the same tasks do not; the message names the missing task ids."""


def _missing(ids: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(sorted(ids)[:limit])
    return f"{len(ids)} task(s): {shown}" + (", ..." if len(ids) > limit else "")


def check_same_tasks(a: PerTask, b: PerTask, names: tuple[str, str] = ("a", "b")) -> None:
    """Raise TaskMismatchError naming the task ids of one side missing from the other."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        parts = [f"missing from {names[1]}: {_missing(only_a)}"] if only_a else []
        parts += [f"missing from {names[0]}: {_missing(only_b)}"] if only_b else []
        raise TaskMismatchError(f"{names[0]} and {names[1]} must cover the same held-out tasks; " + "; ".join(parts))


def pool_seeds(per_seed: PerTask | Sequence[PerTask], name: str = "arm") -> dict[str, float]:
    """One per-task pass@1 from several seeds' results: each task's mean over the seeds (all on the same tasks)."""
    runs = [per_seed] if isinstance(per_seed, Mapping) else list(per_seed)
    if not runs:
        raise ValueError(f"{name}: no results to pool")
    for i, run in enumerate(runs[1:], start=1):
        check_same_tasks(runs[0], run, (f"{name} seed #0", f"{name} seed #{i}"))
    for run in runs:
        bad = [t for t, v in run.items() if not 0.0 <= float(v) <= 1.0]
        if bad:
            raise ValueError(f"{name}: pass@1 must lie in [0, 1]; task {bad[0]!r} has {run[bad[0]]}")
    return {task: sum(float(run[task]) for run in runs) / len(runs) for task in runs[0]}


def _interval(values, n_resamples: int, confidence: float, seed: int) -> tuple[float, float]:
    import numpy as np

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    chunk = max(1, 2_000_000 // len(values))  # bounded memory for large task sets
    for start in range(0, n_resamples, chunk):
        stop = min(n_resamples, start + chunk)
        means[start:stop] = values[rng.integers(0, len(values), size=(stop - start, len(values)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    # a constant sample gives the same mean in every resample up to rounding: report it exactly
    if values.min() == values.max():
        lo = hi = float(values[0])
    return float(lo), float(hi)


def bootstrap_ci(arm: PerTask | Sequence[PerTask], n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE,
                 seed: int = SEED, name: str = "arm") -> dict[str, Any]:
    """Mean pass@1 over tasks (seeds pooled) and its percentile bootstrap interval.

    Returns {"mean", "ci": [lo, hi], "n_tasks", "n_seeds", "n_resamples", "confidence"}."""
    pooled = pool_seeds(arm, name)
    if not pooled:
        raise ValueError(f"{name}: no tasks")
    tasks = sorted(pooled)
    values = [pooled[t] for t in tasks]
    lo, hi = _interval(values, n_resamples, confidence, seed)
    return {"mean": sum(values) / len(values), "ci": [lo, hi], "n_tasks": len(tasks),
            "n_seeds": 1 if isinstance(arm, Mapping) else len(arm), "n_resamples": n_resamples,
            "confidence": confidence}


def paired_bootstrap(a: PerTask | Sequence[PerTask], b: PerTask | Sequence[PerTask], n_resamples: int = N_RESAMPLES,
                     confidence: float = CONFIDENCE, seed: int = SEED,
                     names: tuple[str, str] = ("a", "b")) -> dict[str, Any]:
    """mean(a) - mean(b) over the same tasks (each arm's seeds pooled) and its paired percentile interval.

    Returns {"mean_diff", "ci": [lo, hi], "mean_a", "mean_b", "n_tasks", "n_resamples", "confidence"}.
    Raises TaskMismatchError when the arms do not cover the same task ids."""
    pooled_a, pooled_b = pool_seeds(a, names[0]), pool_seeds(b, names[1])
    check_same_tasks(pooled_a, pooled_b, names)
    if not pooled_a:
        raise ValueError(f"{names[0]} and {names[1]}: no tasks")
    tasks = sorted(pooled_a)
    diffs = [pooled_a[t] - pooled_b[t] for t in tasks]
    lo, hi = _interval(diffs, n_resamples, confidence, seed)
    mean_a = sum(pooled_a[t] for t in tasks) / len(tasks)
    mean_b = sum(pooled_b[t] for t in tasks) / len(tasks)
    return {"mean_diff": sum(diffs) / len(diffs), "ci": [lo, hi], "mean_a": mean_a, "mean_b": mean_b,
            "n_tasks": len(tasks), "n_resamples": n_resamples, "confidence": confidence}
