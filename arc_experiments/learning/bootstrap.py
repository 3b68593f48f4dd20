"""Bootstrap confidence intervals over tasks for held-out pass@1 (docs/learning.md, "GPU").

The unit of resampling is the task: a task's attempts are correlated (the same model on the same grids), so resampling
attempts would understate the noise. Each arm is given as its per-task pass@1 (the mean over a task's attempts of
"every test output correct", `per_task.py`), one mapping per training seed; seeds are pooled by averaging
each task's pass@1 over them.

- `paired_bootstrap(a, b)`: the difference `mean(a) - mean(b)` over the same tasks and its percentile interval, the
  same resampled tasks for both arms (a paired design: task difficulty cancels).
- `bootstrap_ci(a)`: one arm's mean pass@1 and its percentile interval (the bands of the pass@1-over-steps plots).
- `gain_bootstrap(runs, starts, base_runs, base_starts)`: each run's gain over the student it started from (one student
  per machine that rebuilt it), averaged per task, minus the same for a second arm: the comparison that stays fair when
  the arms' runs did not all start from the same student. With one student for every run it equals `paired_bootstrap`.
- `seed_task_bootstrap(runs, starts, base_runs, base_starts)`: the same difference with seed-to-seed variance in its
  interval: each resample draws the tasks and, independently for each arm, its training runs (seeds) with
  replacement. The intervals above hold the runs fixed and so cover the choice of tasks only.

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


def gain_bootstrap(runs: Sequence[PerTask], starts: Sequence[PerTask], base_runs: Sequence[PerTask] = (),
                   base_starts: Sequence[PerTask] = (), n_resamples: int = N_RESAMPLES,
                   confidence: float = CONFIDENCE, seed: int = SEED,
                   names: tuple[str, str] = ("a", "b")) -> dict[str, Any]:
    """Per task: the mean over `runs` of (run - its start, `starts[i]`), minus the same for `base_runs` (none: minus 0);
    its mean over tasks and the paired percentile interval (the same resampled tasks for every term).

    Returns {"mean_diff", "ci": [lo, hi], "n_tasks", "n_resamples", "confidence"}. ValueError when a run has no start
    or an arm has no run; TaskMismatchError when the results do not cover the same tasks."""
    if not runs or len(runs) != len(starts) or len(base_runs) != len(base_starts):
        raise ValueError(f"{names[0]} / {names[1]}: every run needs the student it started from "
                         f"({len(runs)} runs, {len(starts)} starts; {len(base_runs)} runs, {len(base_starts)} starts)")
    every = [*runs, *starts, *base_runs, *base_starts]
    pool_seeds(every, " / ".join(names))  # the same tasks everywhere, values in [0, 1]
    tasks = sorted(every[0])

    def gain(rs: Sequence[PerTask], ss: Sequence[PerTask], task: str) -> float:
        return sum(float(r[task]) - float(s[task]) for r, s in zip(rs, ss)) / len(rs) if rs else 0.0

    diffs = [gain(runs, starts, t) - gain(base_runs, base_starts, t) for t in tasks]
    lo, hi = _interval(diffs, n_resamples, confidence, seed)
    return {"mean_diff": sum(diffs) / len(diffs), "ci": [lo, hi], "n_tasks": len(tasks), "n_resamples": n_resamples,
            "confidence": confidence}


def seed_task_bootstrap(runs: Sequence[PerTask], starts: Sequence[PerTask], base_runs: Sequence[PerTask] = (),
                        base_starts: Sequence[PerTask] = (), n_resamples: int = N_RESAMPLES,
                        confidence: float = CONFIDENCE, seed: int = SEED,
                        names: tuple[str, str] = ("a", "b")) -> dict[str, Any]:
    """`gain_bootstrap`'s difference (each run's per-task gain over its own start, arm mean minus base-arm mean), with
    an interval that resamples seeds as well as tasks: per resample, tasks with replacement (shared by both arms:
    paired) and each arm's runs with replacement. With one run per arm it reduces to the task-only interval, which is
    why `n_seeds` is returned for the caller to report (at least 3 per arm make a seed-to-seed claim).

    Returns {"mean_diff", "ci": [lo, hi], "n_tasks", "n_seeds": [runs, base runs], "n_resamples", "confidence",
    "resampled": "tasks and seeds"}."""
    import numpy as np

    point = gain_bootstrap(runs, starts, base_runs, base_starts, n_resamples=1, confidence=confidence, seed=seed,
                           names=names)  # validates the inputs and gives the point estimate
    tasks = sorted(runs[0])
    gains = np.array([[float(r[t]) - float(s[t]) for t in tasks] for r, s in zip(runs, starts)])
    base = (np.array([[float(r[t]) - float(s[t]) for t in tasks] for r, s in zip(base_runs, base_starts)])
            if base_runs else np.zeros((1, len(tasks))))
    rng = np.random.default_rng(seed)
    values = np.empty(n_resamples)
    chunk = max(1, 2_000_000 // max(len(tasks), 1))
    for start in range(0, n_resamples, chunk):
        size = min(n_resamples, start + chunk) - start
        task_w = rng.multinomial(len(tasks), np.full(len(tasks), 1 / len(tasks)), size=size) / len(tasks)
        run_w = rng.multinomial(len(gains), np.full(len(gains), 1 / len(gains)), size=size) / len(gains)
        base_w = rng.multinomial(len(base), np.full(len(base), 1 / len(base)), size=size) / len(base)
        per_task = run_w @ gains - base_w @ base  # (size, tasks): each resample's arm-minus-base gain per task
        values[start:start + size] = (per_task * task_w).sum(axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = (float(x) for x in np.percentile(values, [tail, 100 - tail]))
    if np.ptp(gains, axis=None) == 0 and np.ptp(base, axis=None) == 0:  # constant: exact, not rounded resamples
        lo = hi = point["mean_diff"]
    return {"mean_diff": point["mean_diff"], "ci": [lo, hi], "n_tasks": len(tasks),
            "n_seeds": [len(runs), len(base_runs)], "n_resamples": n_resamples, "confidence": confidence,
            "resampled": "tasks and seeds"}
