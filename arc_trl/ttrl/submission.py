"""`submission.json` of a test-time run, from the finished tasks' attempts; and, after it is written, its score.

Every task of the run is in the submission, two attempts per test input (`arc_trl.eval.submission.build_submission`:
the attempts' predictions voted, the placeholder grid where nothing was predicted), and the file is checked with the
project's validator before it is written. Solutions are read by `score_written` alone, from the written file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask
from arc_trl.eval.submission import (
    SUBMISSION_FILE,
    build_submission,
    score_submission,
    submission_problems,
    task_solutions,
    write_submission,
)
from arc_trl.ttrl.task_folder import TaskFolder

SUMMARY_FILE = "ttrl_summary.json"


def vote_records(out: str | Path, tasks: Sequence[ArcTask]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the finished tasks' attempts as voting records, the ids of the tasks with no attempt)."""
    records: list[dict[str, Any]] = []
    without = []
    for task in tasks:
        attempts = TaskFolder(out, task.id).attempts()
        if not attempts:
            without.append(task.id)
        records += [{"task_id": task.id, "attempt": r["attempt"],
                     "test_predictions": (r.get("outcome") or {}).get("test_predictions")} for r in attempts]
    return records, without


def write_ttrl_submission(out: str | Path, tasks: Sequence[ArcTask], fallback: str = "zero") -> dict[str, Any]:
    """Write `out/submission.json` (validated) for `tasks`; returns what went into it."""
    task_map = {task.id: task for task in tasks}
    records, without = vote_records(out, tasks)
    submission, summary = build_submission(records, task_map, fallback=fallback)
    problems = submission_problems(submission, task_map)
    if problems:  # a bug: build_submission always fills every entry
        raise ValueError("built an invalid submission:\n" + "\n".join(problems))
    path = write_submission(submission, Path(out) / SUBMISSION_FILE)
    predicted = {tid for tid, entries in submission.items() if tid not in without}
    return {"submission": str(path), "n_tasks": len(task_map), "n_test_inputs": summary.n_test_inputs,
            "attempt_1_predicted": summary.n_attempt_1_voted, "attempt_2_predicted": summary.n_attempt_2_voted,
            "tasks_without_attempts": without, "tasks_with_attempts": sorted(predicted), "fallback": fallback}


def score_written(submission_path: str | Path, solved: Sequence[ArcTask]) -> dict[str, Any] | None:
    """The Kaggle score of the written file against `solved` (tasks with their test outputs); None when none has."""
    solutions = task_solutions({task.id: task for task in solved})
    if not solutions:
        return None
    result = score_submission(json.loads(Path(submission_path).read_text()), solutions)
    return {"score": result.score, "n_correct": result.n_correct, "n_test_inputs": result.n_test_inputs,
            "n_scored_tasks": len(solutions), "task_scores": result.task_scores}
