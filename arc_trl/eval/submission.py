"""Kaggle ARC Prize submissions: build one from per-attempt predictions, validate it, score it.

Format (`submission.json`)::

    {task_id: [{"attempt_1": grid, "attempt_2": grid}, ...]}   # one entry per test input, in test order

Building: for each test input, the attempts' predictions are voted (`voting.py`); attempt_1 is the most voted grid,
attempt_2 the second most voted. Where there is no such grid (no attempt, or only one distinct valid prediction),
the fallback is used: `[[0]]` by default ("zero"), or the test input itself ("input"). Every task id and every test
index of the challenges file is present, so the file is always complete.

Scoring (Kaggle rule): a test input is correct when either attempt equals its solution exactly; a task scores the
fraction of its test inputs that are correct; the total is the mean over tasks.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arc_trl.tasks import load_tasks
from arc_trl.data.task import ArcTask, Grid, grid_problem
from arc_trl.eval.passk import read_per_attempt
from arc_trl.eval.voting import Inverter, invert_augmentation, record_origin, vote
from arc_trl.rewards.scoring import exact_match

ATTEMPT_KEYS = ("attempt_1", "attempt_2")
FALLBACKS = ("zero", "input")
SUBMISSION_FILE = "submission.json"

Submission = dict[str, list[dict[str, Grid]]]
TaskSource = str | Path | Mapping[str, ArcTask] | Sequence[ArcTask]


# ----------------------------------------------------------------------------------------------- loading challenges


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: {what} file not found")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: {what} file is not valid JSON ({e.msg} at line {e.lineno})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: {what} file is not UTF-8 text ({e})") from None


def load_challenges(spec: str | Path, solutions: str | Path | None = None) -> dict[str, ArcTask]:
    """{task_id: ArcTask} of anything `arc_trl.load_tasks` reads: a Kaggle `X_challenges.json` (solutions
    from `solutions`, else from the sibling `X_solutions.json` when it exists), a bundled dataset name such as
    'arc-agi-2/eval' (with solutions), or a folder of per-task files."""
    return {task.id: task for task in load_tasks(spec, solutions=solutions)}


def as_task_map(tasks: TaskSource) -> dict[str, ArcTask]:
    """{task_id: ArcTask} from a path / dataset name, a mapping of tasks or a list of tasks."""
    if isinstance(tasks, (str, Path)):
        return load_challenges(tasks)
    if isinstance(tasks, Mapping):
        return dict(tasks)
    return {task.id: task for task in tasks}


# ------------------------------------------------------------------------------------------------------- building


@dataclass
class SubmissionSummary:
    """What went into a built submission (printed by the submit command)."""

    n_tasks: int = 0
    n_test_inputs: int = 0
    n_attempt_1_voted: int = 0  # test inputs whose attempt_1 is a prediction (not the fallback)
    n_attempt_2_voted: int = 0  # test inputs whose attempt_2 is a prediction (not the fallback)
    unknown_task_ids: list[str] = field(default_factory=list)  # predicted tasks absent from the challenges

    def describe(self) -> str:
        text = (
            f"{self.n_tasks} tasks, {self.n_test_inputs} test inputs: attempt_1 predicted for "
            f"{self.n_attempt_1_voted}, attempt_2 predicted for {self.n_attempt_2_voted}, the rest use the fallback"
        )
        if self.unknown_task_ids:
            shown = ", ".join(self.unknown_task_ids[:5]) + (" ..." if len(self.unknown_task_ids) > 5 else "")
            text += f"; ignored predictions for {len(self.unknown_task_ids)} tasks not in the challenges ({shown})"
        return text


def fallback_grid(test_input: Grid, fallback: str) -> Grid:
    if fallback == "zero":
        return [[0]]
    if fallback == "input":
        return copy.deepcopy(test_input)
    raise ValueError(f"unknown fallback {fallback!r}; choose one of {FALLBACKS}")


def build_submission(
    records: Iterable[Mapping[str, Any]],
    tasks: TaskSource,
    invert: Inverter = invert_augmentation,
    fallback: str = "zero",
) -> tuple[Submission, SubmissionSummary]:
    """Vote the per-attempt records into a complete submission for `tasks`; see the module docstring."""
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r}; choose one of {FALLBACKS}")
    task_map = as_task_map(tasks)
    records = list(records)
    origins = [record_origin(r)[0] for r in records]
    known = [r for r, origin in zip(records, origins, strict=True) if origin in task_map]
    unknown = list(dict.fromkeys(origin for origin in origins if origin not in task_map))
    rankings = vote(known, {tid: len(task.test_inputs) for tid, task in task_map.items()}, invert)
    submission: Submission = {}
    summary = SubmissionSummary(n_tasks=len(task_map), unknown_task_ids=unknown)
    for task_id, task in task_map.items():
        entries = []
        for i, test_input in enumerate(task.test_inputs):
            ranking = rankings[task_id][i] if task_id in rankings else []
            attempts = [grid for grid, _ in ranking[:2]]
            summary.n_attempt_1_voted += len(attempts) >= 1
            summary.n_attempt_2_voted += len(attempts) >= 2
            attempts += [fallback_grid(test_input, fallback) for _ in range(2 - len(attempts))]
            entries.append(dict(zip(ATTEMPT_KEYS, attempts, strict=True)))
        summary.n_test_inputs += len(entries)
        submission[task_id] = entries
    return submission, summary


def make_submission(
    per_attempt: str | Path | Iterable[Mapping[str, Any]],
    challenges_tasks: TaskSource,
    out_path: str | Path | None,
    invert: Inverter = invert_augmentation,
    fallback: str = "zero",
) -> Submission:
    """Build the submission from `per_attempt` (per_attempt.jsonl, its folder, or records) and write it to `out_path`
    (skipped when None). Raises ValueError if the result fails validation (which would be a bug)."""
    records = read_per_attempt(per_attempt) if isinstance(per_attempt, (str, Path)) else per_attempt
    task_map = as_task_map(challenges_tasks)
    submission, _ = build_submission(records, task_map, invert, fallback)
    problems = submission_problems(submission, task_map)
    if problems:
        raise ValueError("built an invalid submission:\n" + "\n".join(problems))
    if out_path is not None:
        write_submission(submission, out_path)
    return submission


def write_submission(submission: Submission, out_path: str | Path) -> Path:
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(submission, separators=(",", ":")))
    return out_path


# ----------------------------------------------------------------------------------------------------- validation


def check_grid(grid: Any) -> str | None:
    """What is wrong with a submitted grid, or None. Unlike `grid_problem`, numpy arrays and tuples are rejected:
    only JSON lists of lists of ints 0..9 are valid in a submission file."""
    if not isinstance(grid, list):
        return f"grid must be a list of rows, got {type(grid).__name__}"
    for r, row in enumerate(grid):
        if not isinstance(row, list):
            return f"row {r} must be a list, got {type(row).__name__}"
    return grid_problem(grid)


def submission_problems(submission: Any, tasks: Mapping[str, ArcTask | int]) -> list[str]:
    """Every problem of `submission` against the challenge tasks (or {task_id: number of test inputs}); [] if valid."""
    if not isinstance(submission, dict):
        return [
            f"submission must be an object mapping task ids to lists of test entries, got {type(submission).__name__}"
        ]
    n_tests = {tid: t if isinstance(t, int) else len(t.test_inputs) for tid, t in tasks.items()}
    problems = [f"task {tid!r}: missing from the submission" for tid in n_tests if tid not in submission]
    problems += [f"task {tid!r}: not in the challenges file (extra task)" for tid in submission if tid not in n_tests]
    for task_id, expected in n_tests.items():
        if task_id not in submission:
            continue
        entries = submission[task_id]
        if not isinstance(entries, list):
            problems.append(
                f"task {task_id!r}: expected a list of {expected} test entries, got {type(entries).__name__}"
            )
            continue
        if len(entries) != expected:
            problems.append(
                f"task {task_id!r}: has {len(entries)} test entries, the challenges have {expected} test inputs"
            )
        for i, entry in enumerate(entries):
            where = f"task {task_id!r} test {i}"
            if not isinstance(entry, dict):
                problems.append(f"{where}: expected an object with attempt_1 and attempt_2, got {type(entry).__name__}")
                continue
            for key in ATTEMPT_KEYS:
                if key not in entry:
                    problems.append(f"{where}: missing {key!r}")
                    continue
                problem = check_grid(entry[key])
                if problem:
                    problems.append(f"{where} {key}: {problem}")
    return problems


# -------------------------------------------------------------------------------------------------------- scoring


@dataclass
class SubmissionScore:
    score: float  # mean task score over the scored tasks
    task_scores: dict[str, float]  # fraction of each task's test inputs answered correctly by either attempt
    n_test_inputs: int
    n_correct: int


def score_submission(submission: Any, solutions: Mapping[str, Sequence[Grid]]) -> SubmissionScore:
    """Kaggle score of `submission` against {task_id: [solution grid per test input]}; malformed parts score 0."""
    submission = submission if isinstance(submission, dict) else {}
    task_scores, n_inputs, n_correct = {}, 0, 0
    for task_id, targets in solutions.items():
        entries = submission.get(task_id)
        entries = entries if isinstance(entries, list) else []
        correct = 0
        for i, target in enumerate(targets):
            entry = entries[i] if i < len(entries) and isinstance(entries[i], dict) else {}
            correct += any(
                check_grid(entry.get(key)) is None and exact_match(entry[key], target) for key in ATTEMPT_KEYS
            )
        task_scores[task_id] = correct / len(targets) if targets else 0.0
        n_inputs += len(targets)
        n_correct += correct
    score = sum(task_scores.values()) / len(task_scores) if task_scores else 0.0
    return SubmissionScore(score, task_scores, n_inputs, n_correct)


def task_solutions(tasks: Mapping[str, ArcTask]) -> dict[str, list[Grid]]:
    """{task_id: test outputs} for the tasks whose solutions are known."""
    return {tid: list(task.test_outputs) for tid, task in tasks.items() if task.test_outputs is not None}


# ------------------------------------------------------------------------------------------------------------ CLIs


def validate_main(argv: Sequence[str] | None = None) -> int:
    """`arc-trl validate-submission`: print every problem; exit 1 if invalid, 2 if inputs cannot be read."""
    parser = argparse.ArgumentParser(description="Validate (and, with solutions, score) a Kaggle ARC submission.")
    parser.add_argument("--submission", required=True, help="submission.json to check")
    parser.add_argument(
        "--challenges", required=True, help="Kaggle challenges JSON, or a dataset name (arc-agi-2/eval)"
    )
    parser.add_argument(
        "--solutions", default=None, help="Kaggle solutions JSON (default: X_solutions.json beside X_challenges.json)"
    )
    args = parser.parse_args(argv)
    try:
        tasks = load_challenges(args.challenges, args.solutions)
        submission = _read_json(Path(args.submission), "submission")
    except (OSError, ValueError) as e:
        print(f"error: {e}")
        return 2
    problems = submission_problems(submission, tasks)
    for problem in problems:
        print(problem)
    n_inputs = sum(len(task.test_inputs) for task in tasks.values())
    if problems:
        print(f"INVALID: {len(problems)} problems in {args.submission} ({len(tasks)} tasks, {n_inputs} test inputs)")
    else:
        print(f"valid: {args.submission} covers all {len(tasks)} tasks and {n_inputs} test inputs")
    solutions = task_solutions(tasks)
    if solutions:
        result = score_submission(submission, solutions)
        partial = (
            f" (solutions known for {len(solutions)} of {len(tasks)} tasks)" if len(solutions) < len(tasks) else ""
        )
        print(
            f"score: {result.score:.4f} = {100 * result.score:.2f}% over {len(solutions)} tasks{partial}; "
            f"{result.n_correct}/{result.n_test_inputs} test inputs correct"
        )
    return 1 if problems else 0


def add_submit_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--per-attempt", required=True, help="per_attempt.jsonl, or the evaluation folder holding it")
    parser.add_argument(
        "--challenges", required=True, help="Kaggle challenges JSON, or a dataset name (arc-agi-2/eval)"
    )
    parser.add_argument("--output", default=None, help="submission path (default: submission.json beside per_attempt)")
    parser.add_argument("--fallback", choices=FALLBACKS, default="zero", help="grid used where nothing was predicted")
    return parser


def run_submit(args: argparse.Namespace) -> int:
    """`arc-trl evaluate submit`: exit 0 written, 1 invalid result (a bug), 2 unreadable or malformed inputs."""
    per_attempt = Path(args.per_attempt)
    output = (
        Path(args.output)
        if args.output
        else (per_attempt if per_attempt.is_dir() else per_attempt.parent) / SUBMISSION_FILE
    )
    try:
        tasks = load_challenges(args.challenges)
        submission, summary = build_submission(read_per_attempt(per_attempt), tasks, fallback=args.fallback)
    except (OSError, ValueError, LookupError) as e:  # unreadable / malformed inputs, named in the message
        print(f"error: {e}", file=sys.stderr)
        return 2
    problems = submission_problems(submission, tasks)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    write_submission(submission, output)
    print(f"wrote {output}: {summary.describe()}")
    solutions = task_solutions(tasks)
    if solutions:
        result = score_submission(submission, solutions)
        print(
            f"score: {100 * result.score:.2f}% over {len(solutions)} tasks "
            f"({result.n_correct}/{result.n_test_inputs} test inputs correct)"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Vote per-attempt predictions into a Kaggle ARC submission.")
    return run_submit(add_submit_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
