"""pass@k: the probability that at least one of k attempts, drawn without replacement from n, solves the task.

For a task with n attempts of which c passed, the unbiased estimator (Chen et al., 2021, "Evaluating Large Language
Models Trained on Code") is

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)

(the product form avoids huge binomials). The dataset value is the mean over tasks, the WHOLE dataset by default: an
evaluation folder's `metrics.json` gives the dataset's tasks with known solutions (`n_dataset_tasks_with_solutions`),
and those never attempted (prompts too long for the model, a run cut short) count as failures: 1 of 400 solved is
0.25%, not 1/396. When tasks have different numbers of attempts, pass@k only averages the tasks with n >= k (the
others cannot be drawn k times) and the unattempted ones; `tasks_at_k` in the result says how many tasks each value
covers.

An attempt "passes" when its `passed` field in `per_attempt.jsonl` is true (every test output correct). Attempts whose
`passed` is null (solutions unknown) are left out; a task with no scored attempt is left out. Attempts on augmented
copies of a task (task id "<id>|<augmentation>") count as attempts at the original task.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from arc_trl.eval.voting import record_origin

PER_ATTEMPT_FILE = "per_attempt.jsonl"
PASS_AT_K_FILE = "pass_at_k.json"
PASS_AT_K_PLOT = "pass_at_k.png"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with `n` attempts of which `c` are correct."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0
    failure = 1.0
    for i in range(n - c + 1, n + 1):
        failure *= 1.0 - k / i
    return 1.0 - failure


def default_ks(max_n: int) -> list[int]:
    """1, 2, 4, ... (powers of two below `max_n`) and `max_n` itself."""
    if max_n < 1:
        return []
    ks, k = [], 1
    while k < max_n:
        ks.append(k)
        k *= 2
    return ks + [max_n]


def read_per_attempt(path: str | Path) -> list[dict[str, Any]]:
    """Read `per_attempt.jsonl` (or the evaluation folder holding it) into a list of records."""
    path = Path(path)
    if path.is_dir():
        path = path / PER_ATTEMPT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (expected the per_attempt.jsonl written by "
                                "`arc-trl evaluate score`)")
    records = []
    with path.open() as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{line_number}: not valid JSON ({e.msg})") from None
            if not isinstance(record, dict) or "task_id" not in record:
                raise ValueError(f"{path}:{line_number}: expected an object with a 'task_id'")
            records.append(record)
    return records


def count_passes(records: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """{original task_id: (n scored attempts, c passed attempts)}, in first-seen order; unscored attempts skipped."""
    counts: dict[str, list[int]] = {}
    for record in records:
        passed = record.get("passed")
        if passed is None:
            continue
        n_c = counts.setdefault(record_origin(record)[0], [0, 0])
        n_c[0] += 1
        n_c[1] += int(bool(passed))
    return {task_id: (n, c) for task_id, (n, c) in counts.items()}


def pass_at_k_curve(counts: Mapping[str, tuple[int, int]], ks: Iterable[int] | None = None,
                    dataset_tasks: int | None = None) -> dict[str, Any]:
    """Mean pass@k over tasks for each k (default `default_ks(max n)`), as saved in `pass_at_k.json`;
    `dataset_tasks`: the dataset's tasks with known solutions, the attempted ones included: the others count as
    failures (None: the attempted tasks alone).

    Returns {"n_tasks", "n_dataset_tasks", "n_unattempted_tasks", "min_attempts", "max_attempts",
    "pass_at_k": {"k": value}, "tasks_at_k": {"k": n_tasks}}; JSON keys are strings. A k that no attempted task
    reaches is left out. ValueError when `dataset_tasks` is below the attempted tasks."""
    unattempted = 0 if dataset_tasks is None else dataset_tasks - len(counts)
    if unattempted < 0:
        raise ValueError(f"{len(counts)} tasks attempted but the dataset is given {dataset_tasks} tasks")
    sizes = [n for n, _ in counts.values()]
    head = {"n_tasks": len(counts), "n_dataset_tasks": len(counts) + unattempted, "n_unattempted_tasks": unattempted}
    if not counts:
        return {**head, "min_attempts": 0, "max_attempts": 0, "pass_at_k": {}, "tasks_at_k": {}}
    ks = sorted(set(default_ks(max(sizes)) if ks is None else ks))
    values, covered = {}, {}
    for k in ks:
        scores = [pass_at_k(n, c, k) for n, c in counts.values() if n >= k]
        if scores:
            values[str(k)] = sum(scores) / (len(scores) + unattempted)
            covered[str(k)] = len(scores) + unattempted
    return {**head, "min_attempts": min(sizes), "max_attempts": max(sizes), "pass_at_k": values, "tasks_at_k": covered}


def dataset_tasks_of(eval_dir: str | Path) -> int | None:
    """The dataset's tasks with known solutions, from the folder's `metrics.json` (None for folders scored before it
    recorded them, or without metrics.json: pass@k is then over the attempted tasks)."""
    path = Path(eval_dir) / "metrics.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text()).get("n_dataset_tasks_with_solutions")
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg})") from None
    return int(value) if value is not None else None


def load_pass_at_k(eval_dir: str | Path) -> dict[str, Any] | None:
    """The pass@k curve of an evaluation folder: `pass_at_k.json` if present, else computed from per_attempt.jsonl.

    None when the folder has neither file.
    """
    eval_dir = Path(eval_dir)
    saved = eval_dir / PASS_AT_K_FILE
    if saved.is_file():
        try:
            return json.loads(saved.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{saved}: not valid JSON ({e.msg})") from None
    if (eval_dir / PER_ATTEMPT_FILE).is_file():
        return pass_at_k_curve(count_passes(read_per_attempt(eval_dir)), dataset_tasks=dataset_tasks_of(eval_dir))
    return None


def write_pass_at_k(eval_dir: str | Path, plot: bool = True, label: str | None = None) -> dict[str, Any]:
    """Compute pass@k from `eval_dir/per_attempt.jsonl` over the dataset of its `metrics.json`; write
    `pass_at_k.json` and (if `plot`) `pass_at_k.png`."""
    eval_dir = Path(eval_dir)
    curve = pass_at_k_curve(count_passes(read_per_attempt(eval_dir)), dataset_tasks=dataset_tasks_of(eval_dir))
    (eval_dir / PASS_AT_K_FILE).write_text(json.dumps(curve, indent=2) + "\n")
    if plot and curve["pass_at_k"]:
        from arc_trl.eval.plots import plot_pass_at_k

        plot_pass_at_k({label or eval_dir.name: curve}, eval_dir / PASS_AT_K_PLOT)
    return curve
