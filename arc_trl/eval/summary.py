"""What an evaluation folder says at a glance: pass@1 / pass@2 / pass@k, the Kaggle score, why attempts failed.

`summarise_folder(DIR)` reads a scored folder (`per_attempt.jsonl`, `pass_at_k.json`, `metrics.json`, and the
`finish_reason` of each attempt from `completions.jsonl` when present) and returns an `EvalSummary`:

- pass@k for k = 1, 2 and the largest k (unbiased estimator, over the whole dataset: `pass_at_k.json`);
- the Kaggle score: the attempts' predictions voted into 2 attempts per test input (`arc-trl evaluate submit`'s
  rule, `arc_trl.eval.submission`), scored against the solutions, over the dataset's tasks with solutions
  (unattempted ones score 0);
- the kind of every attempt (`arc_trl.eval.error_kinds`: solved, wrong, truncated, no code, syntax, timeout,
  runtime, no submit) counted;
- per task: attempts, passes, best pixel score, kinds (`format_summary(..., per_task=True)` prints them).

`arc-trl evaluate generate` prints it at the end (`--per-task` for the task rows); `arc-trl view` shows its headline.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask
from arc_trl.eval.error_kinds import FAILURE_KINDS, attempt_kind, kind_counts
from arc_trl.eval.passk import load_pass_at_k, read_per_attempt
from arc_trl.eval.voting import record_origin

COMPLETIONS_FILE = "completions.jsonl"


@dataclass
class EvalSummary:
    n_tasks: int
    n_attempts: int
    n_dataset_tasks: int | None
    pass_at: dict[int, float]  # k -> pass@k over the dataset
    kaggle: float | None  # Kaggle score (2 voted attempts per test input); None without solutions
    kaggle_tasks: int
    kinds: dict[str, int]  # attempt kind -> attempts
    per_task: list[dict[str, Any]] = field(default_factory=list)


def finish_reasons(eval_dir: Path) -> dict[tuple[str, int], str]:
    """(original task id, attempt) -> finish_reason, from the folder's completions.jsonl ({} without one)."""
    path = eval_dir / COMPLETIONS_FILE
    out: dict[tuple[str, int], str] = {}
    if not path.is_file():
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line
            if isinstance(record, dict) and isinstance(record.get("finish_reason"), str):
                out[(record_origin(record)[0], record.get("attempt"))] = record["finish_reason"]
    return out


def row_kind(row: dict[str, Any], finish_reason: str | None) -> str:
    return attempt_kind(row.get("passed"), bool(row.get("valid_outputs")), finish_reason,
                        bool(row.get("code_found")), row.get("error_kind"))


def _dataset_tasks(eval_dir: Path) -> list[ArcTask] | None:
    try:
        spec = json.loads((eval_dir / "metrics.json").read_text()).get("dataset")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    if not isinstance(spec, str):
        return None
    from arc_trl.tasks import load_tasks

    try:
        return load_tasks(spec)
    except Exception:  # noqa: BLE001  the summary stands without the Kaggle score
        return None


def _scored_tasks(eval_dir: Path, tasks: list[ArcTask] | None, rows: Sequence[dict[str, Any]]) -> list[ArcTask] | None:
    """The tasks the folder's pass figures are over: the whole dataset when `metrics.json` counts all of it (`score`),
    else the attempted ones and those `generate` dropped (`--max-tasks`, `--task-ids` select a part of it)."""
    if not tasks:
        return tasks
    try:
        metrics = json.loads((eval_dir / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError):
        metrics = {}
    if metrics.get("n_dataset_tasks") == len(tasks):
        return tasks
    keep = {record_origin(row)[0] for row in rows} | set(metrics.get("dropped_task_ids") or [])
    return [t for t in tasks if t.id in keep]


def kaggle_score(rows: Sequence[dict[str, Any]], tasks: Sequence[ArcTask]) -> tuple[float | None, int]:
    """(score, tasks scored): the rows voted into a submission for `tasks` and scored against their solutions."""
    from arc_trl.eval.submission import as_task_map, build_submission, score_submission, task_solutions

    task_map = as_task_map(list(tasks))
    solutions = task_solutions(task_map)
    if not solutions:
        return None, 0
    submission, _ = build_submission(rows, task_map)
    return score_submission(submission, solutions).score, len(solutions)


def summarise_folder(eval_dir: str | Path, tasks: Sequence[ArcTask] | None = None) -> EvalSummary:
    """The folder's summary (module docstring); `tasks`: the dataset (default: loaded from metrics.json's spec)."""
    eval_dir = Path(eval_dir)
    rows = read_per_attempt(eval_dir)
    reasons = finish_reasons(eval_dir)
    curve = load_pass_at_k(eval_dir) or {}
    tasks = _scored_tasks(eval_dir, list(tasks) if tasks is not None else _dataset_tasks(eval_dir), rows)
    kaggle, kaggle_tasks = kaggle_score(rows, tasks) if tasks else (None, 0)
    by_task: dict[str, dict[str, Any]] = {}
    kinds = []
    for row in rows:
        task_id = record_origin(row)[0]
        kind = row_kind(row, reasons.get((task_id, row.get("attempt"))))
        kinds.append(kind)
        entry = by_task.setdefault(task_id, {"task_id": task_id, "attempts": 0, "passed": 0, "best_pixel": None,
                                             "kinds": []})
        entry["attempts"] += 1
        entry["passed"] += bool(row.get("passed"))
        pixels = row.get("test_pixel")
        if pixels:
            pixel = sum(pixels) / len(pixels)
            entry["best_pixel"] = pixel if entry["best_pixel"] is None else max(entry["best_pixel"], pixel)
        entry["kinds"].append(kind)
    for entry in by_task.values():
        entry["kinds"] = kind_counts(entry["kinds"])
    return EvalSummary(
        n_tasks=len(by_task), n_attempts=len(rows), n_dataset_tasks=curve.get("n_dataset_tasks"),
        pass_at={int(k): v for k, v in (curve.get("pass_at_k") or {}).items()},
        kaggle=kaggle, kaggle_tasks=kaggle_tasks, kinds=kind_counts(kinds), per_task=list(by_task.values()),
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def pass_line(summary: EvalSummary) -> str:
    """`pass@1 3.12% · pass@2 5.00% · pass@8 9.38% · Kaggle (2 attempts, voted) 6.25%`."""
    ks = sorted(summary.pass_at)
    shown = [k for k in (1, 2) if k in summary.pass_at] + ([ks[-1]] if ks and ks[-1] > 2 else [])
    parts = [f"pass@{k} {_pct(summary.pass_at[k])}" for k in shown]
    if summary.kaggle is not None:
        parts.append(f"Kaggle (2 attempts, voted) {_pct(summary.kaggle)}")
    return " · ".join(parts) if parts else "no scored attempt"


def headline(eval_dir: str | Path, tasks: Sequence[ArcTask] | None = None) -> str:
    """One line: the pass figures and the Kaggle score of a scored folder."""
    return pass_line(summarise_folder(eval_dir, tasks))


def format_summary(summary: EvalSummary, per_task: bool = False) -> str:
    """The block `arc-trl evaluate generate` prints: the pass figures, the attempt kinds, optionally one row a task."""
    over = (f"over the {summary.n_dataset_tasks} tasks of the dataset" if summary.n_dataset_tasks
            else f"over {summary.n_tasks} tasks")
    lines = [f"{summary.n_tasks} tasks, {summary.n_attempts} attempts; {pass_line(summary)} ({over})"]
    total = summary.n_attempts or 1
    outcomes = [f"{k} {summary.kinds[k]} ({100 * summary.kinds[k] / total:.0f}%)"
                for k in ("solved", "wrong", "submitted") if k in summary.kinds]
    failures = [f"{k} {summary.kinds.get(k, 0)}" for k in FAILURE_KINDS]
    lines.append("attempts: " + ", ".join(outcomes or ["no valid submission"]) + "; without a valid submission: "
                 + ", ".join(failures))
    if per_task:
        width = max([len("task")] + [len(t["task_id"]) for t in summary.per_task])
        lines.append(f"{'task':<{width}}  solved  attempts  best pixel  kinds")
        for t in summary.per_task:
            solved = f"{t['passed']}/{t['attempts']}" if t["passed"] else "-"
            kinds = ", ".join(f"{k} {n}" for k, n in t["kinds"].items())
            lines.append(f"{t['task_id']:<{width}}  {solved:>6}  {t['attempts']:>8}  {_pct(t['best_pixel']):>10}  "
                         f"{kinds}")
    return "\n".join(lines)


def print_summary(eval_dir: str | Path, tasks: Sequence[ArcTask] | None = None, per_task: bool = False) -> None:
    print(format_summary(summarise_folder(eval_dir, tasks), per_task=per_task))
