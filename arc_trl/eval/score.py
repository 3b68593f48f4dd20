"""`arc-trl evaluate score`: replay recorded completions in the sandbox and measure them against the ground truth.

Inputs: a dataset (anything `arc_trl.load_tasks` reads: `arc-agi-1/eval`, a Kaggle challenges file, a folder of
task files) and a JSONL file with one attempt per line, `{"task_id": "...", "completion": "<assistant text>"}`.
Several lines with the same task id are several attempts. An optional `test_index` is ignored (every test input is
scored). An attempt on an augmented copy of a task has the task id `"<id>|<augmentation>"` (or an `augmentation`
field), as written by `arc_trl.data.augment`; it is replayed on that copy and counts as an attempt at the original.

Every attempt is replayed in a fresh sandbox session (`arc_trl.sandbox.replay_attempt`, mode `auto` by default: the
code blocks run in order; a valid SUBMIT gives the test predictions; otherwise a `transform` left defined is applied
to the train and test inputs). Attempts run in parallel (`--workers`).

Definitions. Per attempt:

- `valid_code`: the completion contains code that parses;
- `valid_outputs`: a valid grid was produced for every test input;
- `correct_grids`: the fraction of test grids exactly right;
- `pixel_score`: the mean over test grids of the fraction of cells right (0 for a missing grid or a wrong shape);
- `passed`: every test grid exactly right;
- `train_*`: the same on the train outputs, for attempts that produced train predictions (a `transform` was applied).

Per task (augmented attempts count for their original task): the mean of each over its attempts (`train_*` over the
attempts that have train predictions); `unique_outputs` = the number of distinct valid prediction sets (mapped back
to the original orientation and colours) / the number of attempts; `is_correct` = 1 when at least one attempt passed
(`train_is_correct`: at least one attempt got every train output right). Dataset: the mean over tasks. Scores that
need the solutions use only the tasks whose solutions are known (null when none are); `train_*` are null when no
attempt produced train predictions. The pass figures, `pass_rate` (pass@1) and `is_correct` (pass@n), are over the
WHOLE dataset: its tasks without any attempt (`n_missing_tasks`: not generated, or dropped for a prompt too long),
whose solutions are known, count as failures (`n_dataset_tasks_with_solutions` is their denominator);
`pass_rate_attempted` and `is_correct_attempted` are the same over the attempted tasks alone. The other means are
over the attempted tasks.

The completions file is streamed, never held in memory (`score_input`): a first pass checks every line, the second
reads each completion as its attempt is replayed. A last line torn by a run killed mid-write is reported and skipped.

Outputs: `DIR/metrics.json` and `DIR/per_attempt.jsonl` (one line per attempt, in input order; keys in
`PER_ATTEMPT_KEYS`). The exit code is 0 whatever the attempts did (1 with `--strict` when the last line was torn);
2 for bad arguments or unreadable inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from statistics import fmean
from typing import Any

from arc_trl.config import defaults
from arc_trl.data.augment import Augmentation
from arc_trl.data.task import ArcTask, Grid, normalize_grid
from arc_trl.eval.score_input import (
    Attempt,
    ScoreInputError,
    resolve_attempts,
    scan_completions,
    stream_completions,
    task_for,
)
from arc_trl.rewards.outcome import AttemptOutcome
from arc_trl.rewards.scoring import exact_match, pixel_accuracy

METRICS_FILE = "metrics.json"
PER_ATTEMPT_FILE = "per_attempt.jsonl"
PER_ATTEMPT_KEYS = (
    "task_id", "attempt", "line", "status", "error_kind", "seconds", "code_found", "code_parsed", "valid_outputs",
    "submitted", "source", "test_predictions", "test_outputs", "test_correct", "test_pixel", "passed",
    "train_predictions",
    "train_correct", "train_pixel", "train_passed",
)  # plus "augmentation" for attempts on an augmented copy
FRACTION_METRICS = (
    "valid_code", "valid_outputs", "unique_outputs", "pixel_score", "correct_grids", "pass_rate", "is_correct",
    "train_pixel_score", "train_correct_grids", "train_pass_rate", "train_is_correct",
)
DATASET_METRICS = ("pass_rate", "is_correct")  # over the whole dataset: unattempted tasks count as failures


# --------------------------------------------------------------------------------------------------------------------
# scoring


def _valid_or_none(grid: Any) -> Grid | None:
    if grid is None:
        return None
    try:
        return normalize_grid(grid)
    except Exception:  # noqa: BLE001  anything that is not a valid grid counts as missing
        return None


def _predictions(values: list[Any] | None, n: int) -> list[Grid | None] | None:
    if values is None:
        return None
    values = list(values)[:n]
    return [_valid_or_none(g) for g in values] + [None] * (n - len(values))


def score_attempt(task: ArcTask, outcome: AttemptOutcome) -> dict[str, Any]:
    """The per-attempt fields (without task_id / attempt / line) of one replayed attempt on `task`."""
    n_test = len(task.test_inputs)
    test = _predictions(outcome.test_predictions, n_test)
    row: dict[str, Any] = {
        "status": outcome.extra.get("status", "ok"),
        "error_kind": outcome.error_kind,
        "seconds": round(float(outcome.extra.get("seconds", 0.0)), 4),
        "code_found": bool(outcome.code_found),
        "code_parsed": bool(outcome.code_parsed),
        "valid_outputs": test is not None and all(g is not None for g in test),
        "submitted": bool(outcome.submitted),
        "source": outcome.extra.get("source"),
        "test_predictions": test if test is not None else [None] * n_test,
    }
    row["test_outputs"] = task.test_outputs  # the expected grids (of the copy the attempt saw), beside its predictions
    if task.test_outputs is not None:
        preds = row["test_predictions"]
        row["test_correct"] = [p is not None and exact_match(p, t) for p, t in zip(preds, task.test_outputs)]
        row["test_pixel"] = [pixel_accuracy(p, t) if p is not None else 0.0 for p, t in zip(preds, task.test_outputs)]
        row["passed"] = all(row["test_correct"])
    else:
        row["test_correct"] = row["test_pixel"] = row["passed"] = None
    train = _predictions(outcome.train_predictions, len(task.train))
    row["train_predictions"] = train
    if train is not None:
        row["train_correct"] = [p is not None and exact_match(p, pair.output) for p, pair in zip(train, task.train)]
        row["train_pixel"] = [pixel_accuracy(p, pair.output) if p is not None else 0.0
                              for p, pair in zip(train, task.train)]
        row["train_passed"] = all(row["train_correct"])
    else:
        row["train_correct"] = row["train_pixel"] = row["train_passed"] = None
    return row


def _mean(values: list[float]) -> float | None:
    return fmean(values) if values else None


def _prediction_key(row: dict[str, Any], augmentation: Augmentation) -> tuple | None:
    """Hashable form of a valid prediction set, in the original task's orientation and colours."""
    if not row["valid_outputs"]:
        return None
    grids = row["test_predictions"]
    if not augmentation.is_identity:
        grids = augmentation.invert(grids)
    return tuple(tuple(tuple(r) for r in g) for g in grids)


def task_metrics(rows: list[dict[str, Any]], augmentations: list[Augmentation]) -> dict[str, float | None]:
    """Per-task values (see the module docstring) from the rows of its attempts."""
    n = len(rows)
    keys = {k for k in (_prediction_key(r, a) for r, a in zip(rows, augmentations)) if k is not None}
    out: dict[str, float | None] = {
        "valid_code": fmean(float(r["code_parsed"]) for r in rows),
        "valid_outputs": fmean(float(r["valid_outputs"]) for r in rows),
        "unique_outputs": len(keys) / n,
        "pixel_score": None, "correct_grids": None, "pass_rate": None, "is_correct": None,
    }
    if rows[0]["passed"] is not None:
        out["pixel_score"] = fmean(fmean(r["test_pixel"]) for r in rows)
        out["correct_grids"] = fmean(fmean(map(float, r["test_correct"])) for r in rows)
        out["pass_rate"] = fmean(float(r["passed"]) for r in rows)
        out["is_correct"] = float(any(r["passed"] for r in rows))
    with_train = [r for r in rows if r["train_correct"] is not None and r["train_correct"]]
    out["train_pixel_score"] = _mean([fmean(r["train_pixel"]) for r in with_train])
    out["train_correct_grids"] = _mean([fmean(map(float, r["train_correct"])) for r in with_train])
    out["train_pass_rate"] = _mean([float(r["train_passed"]) for r in with_train])
    out["train_is_correct"] = float(any(r["train_passed"] for r in with_train)) if with_train else None
    return out


def aggregate(rows: list[dict[str, Any]], attempts: list[Attempt]) -> dict[str, Any]:
    """Dataset metrics: per-task values averaged over tasks (None values left out of each mean)."""
    by_task: dict[str, list[int]] = defaultdict(list)
    for i, attempt in enumerate(attempts):
        by_task[attempt.original_id].append(i)
    per_task = [task_metrics([rows[i] for i in idx], [attempts[i].augmentation for i in idx])
                for idx in by_task.values()]
    metrics: dict[str, Any] = {
        "n_tasks": len(by_task),
        "n_attempts": len(rows),
        "n_tasks_with_solutions": sum(t["is_correct"] is not None for t in per_task),
    }
    for key in FRACTION_METRICS:
        metrics[key] = _mean([t[key] for t in per_task if t[key] is not None])
    metrics["status_counts"] = dict(Counter(r["status"] for r in rows))
    return metrics


# --------------------------------------------------------------------------------------------------------------------
# running


def replay_stream(attempts: list[Attempt], texts: Iterable[str], tasks: list[ArcTask], workers: int,
                  config: Any = None, mode: str = "auto", progress: bool = True,
                  ) -> Iterator[tuple[int, AttemptOutcome]]:
    """(index, outcome) of every attempt as it finishes, each replayed in a fresh sandbox session, `workers` at a
    time. `texts` are the attempts' completions in order; at most 2 x `workers` of them are held at once."""
    from tqdm import tqdm

    from arc_trl.sandbox import SandboxConfig, SandboxPool, replay_attempt

    by_id, cache = {t.id: t for t in tasks}, {}
    jobs = iter(enumerate(zip(attempts, texts, strict=False)))
    with SandboxPool(num_workers=workers, config=config or SandboxConfig()) as pool, \
            ThreadPoolExecutor(workers, thread_name_prefix="score") as executor, \
            tqdm(total=len(attempts), desc="scoring", unit="attempt", disable=not progress, file=sys.stderr) as bar:
        pending: dict[Future, int] = {}

        def refill() -> None:
            while len(pending) < 2 * workers and (job := next(jobs, None)) is not None:
                i, (attempt, text) = job
                pending[executor.submit(replay_attempt, pool, task_for(attempt, by_id, cache), text, mode)] = i

        refill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                i = pending.pop(future)
                try:
                    outcome = future.result()
                except Exception as e:  # noqa: BLE001  a bug must not lose the other attempts
                    print(f"warning: line {attempts[i].line}: replay failed: {type(e).__name__}: {e}",
                          file=sys.stderr)
                    outcome = AttemptOutcome(error_kind="crash", extra={"status": "crashed", "error": str(e)})
                bar.update(1)
                yield i, outcome
            refill()


def replay_all(attempts: list[Attempt], tasks: list[ArcTask], workers: int, config: Any = None, mode: str = "auto",
               progress: bool = True) -> list[AttemptOutcome]:
    """Replay every attempt (with its `completion` in memory); outcomes in input order."""
    outcomes: list[AttemptOutcome | None] = [None] * len(attempts)
    for i, outcome in replay_stream(attempts, [a.completion for a in attempts], tasks, workers, config, mode,
                                    progress):
        outcomes[i] = outcome
    return outcomes  # type: ignore[return-value]


def score_completions(tasks: list[ArcTask], records: list[dict[str, Any]], workers: int = defaults.SANDBOX_WORKERS,
                      config: Any = None, mode: str = "auto", where: str = "<completions>", progress: bool = True,
                      source: str | Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, per-attempt rows) for completion records: as returned by `read_completions`, or by
    `scan_completions` (without their text) with `source` the file to stream the completions from."""
    attempts = resolve_attempts(records, tasks, where)
    if source is not None:
        texts: Iterable[str] = stream_completions(source, [a.line for a in attempts])
    else:
        texts = [r["completion"] for r in records]
    by_id, cache = {t.id: t for t in tasks}, {}
    rows: list[dict[str, Any] | None] = [None] * len(attempts)
    for i, outcome in replay_stream(attempts, texts, tasks, workers, config, mode, progress):
        attempt = attempts[i]
        row = {"task_id": attempt.task_id, "attempt": attempt.index, "line": attempt.line,
               **score_attempt(task_for(attempt, by_id, cache), outcome)}
        if not attempt.augmentation.is_identity:
            row["augmentation"] = attempt.augmentation.to_string()
        rows[i] = row
    if any(row is None for row in rows):  # the file lost lines between the two passes
        raise ScoreInputError(f"{where}: the file changed while it was being scored")
    metrics = aggregate(rows, attempts)  # type: ignore[arg-type]
    attempted = {a.original_id for a in attempts}
    unattempted = [t for t in tasks if t.id not in attempted]
    metrics["n_dataset_tasks"] = len(tasks)
    metrics["n_missing_tasks"] = len(unattempted)
    return over_dataset(metrics, sum(t.has_solutions for t in unattempted)), rows


def over_dataset(metrics: dict[str, Any], unattempted_with_solutions: int) -> dict[str, Any]:
    """`metrics` with the pass figures (`DATASET_METRICS`) over the whole dataset: the unattempted tasks whose
    solutions are known count as failures; `<key>_attempted` keeps each over the attempted tasks."""
    scored = metrics["n_tasks_with_solutions"]
    metrics["n_dataset_tasks_with_solutions"] = scored + unattempted_with_solutions
    for key in DATASET_METRICS:
        value = metrics[key]
        metrics[f"{key}_attempted"] = value
        if value is not None:
            metrics[key] = value * scored / (scored + unattempted_with_solutions)
    return metrics


def write_outputs(output_dir: str | Path, metrics: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """per_attempt.jsonl, then metrics.json, each written whole or not at all: a folder with metrics.json is scored."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    _write_whole(output_dir / PER_ATTEMPT_FILE, "".join(json.dumps(row) + "\n" for row in rows))
    _write_whole(output_dir / METRICS_FILE, json.dumps(metrics, indent=2) + "\n")


def _write_whole(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # two writers never share one
    tmp.write_text(text)
    os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one


# --------------------------------------------------------------------------------------------------------------------
# command line


def add_score_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--dataset", required=True,
                        help="dataset name (e.g. arc-agi-1/eval), Kaggle challenges JSON, or folder of task files")
    parser.add_argument("--solutions", default=None, help="Kaggle solutions file, when not beside the challenges")
    parser.add_argument("--completions", required=True,
                        help='JSONL file, one attempt per line: {"task_id": ..., "completion": ...}')
    parser.add_argument("--output-dir", required=True, help="folder for metrics.json and per_attempt.jsonl")
    parser.add_argument("--workers", type=int, default=min(defaults.SANDBOX_WORKERS, os.cpu_count() or 1),
                        help=f"attempts replayed in parallel (default: min({defaults.SANDBOX_WORKERS}, CPUs))")
    parser.add_argument("--mode", choices=("auto", "repl", "program"), default="auto",
                        help="how to get predictions: SUBMIT, then transform (auto, default); SUBMIT only (repl); "
                             "transform only (program)")
    parser.add_argument("--timeout-s", type=float, default=defaults.SANDBOX_TIMEOUT_S,
                        help="CPU-time limit (seconds) per code run / transform call "
                        f"(default {defaults.SANDBOX_TIMEOUT_S:g})")
    parser.add_argument("--wall-timeout-s", type=float, default=None,
                        help="wall-clock backstop per run for code that sleeps or waits (default: max(4 x "
                             "--timeout-s, --timeout-s + 5))")
    parser.add_argument("--memory-mb", type=int, default=defaults.SANDBOX_MEMORY_MB,
                        help=f"address-space limit of each sandbox process (default {defaults.SANDBOX_MEMORY_MB})")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 (after scoring the complete lines) when the last line of the file is torn")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def run_score(args: argparse.Namespace) -> int:
    """Run `score`; returns the exit code (0 done, 1 torn last line under --strict, 2 bad arguments or inputs)."""
    from arc_trl.tasks import load_tasks
    from arc_trl.sandbox import SandboxConfig

    start = time.perf_counter()
    try:
        if args.workers < 1:
            raise ScoreInputError(f"--workers must be at least 1, got {args.workers}")
        try:
            config = SandboxConfig(timeout_s=args.timeout_s, wall_timeout_s=args.wall_timeout_s,
                                   memory_mb=args.memory_mb)
        except ValueError as e:
            raise ScoreInputError(str(e)) from None
        output_dir = Path(args.output_dir)
        if output_dir.exists() and not output_dir.is_dir():
            raise ScoreInputError(f"--output-dir {output_dir} exists and is not a folder")
        scan = scan_completions(args.completions)
        try:
            tasks = load_tasks(args.dataset, solutions=args.solutions)
        except (OSError, ValueError) as e:  # TaskValidationError is a ValueError
            raise ScoreInputError(f"cannot load dataset {args.dataset!r}: {e}") from None
        metrics, rows = score_completions(tasks, scan.records, args.workers, config, args.mode,
                                          where=args.completions, progress=not args.no_progress, source=scan.path)
        metrics = {"dataset": str(args.dataset), "completions": str(args.completions), **metrics,
                   "torn_last_line": scan.torn_line, "seconds": round(time.perf_counter() - start, 3)}
        write_outputs(output_dir, metrics, rows)
    except ScoreInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: cannot write to {args.output_dir}: {e}", file=sys.stderr)
        return 2
    print(format_summary(metrics))
    from arc_trl.eval.passk import write_pass_at_k
    from arc_trl.eval.tables import write_metrics_table

    write_pass_at_k(output_dir)
    write_metrics_table(output_dir, echo=False)
    if metrics["n_missing_tasks"]:
        print(f"note: {metrics['n_missing_tasks']} task(s) of the dataset have no attempt: they count as failures in "
              "pass_rate and is_correct (pass_rate_attempted, is_correct_attempted: without them)", file=sys.stderr)
    print(f"wrote {output_dir / METRICS_FILE}, {output_dir / PER_ATTEMPT_FILE}, metrics.md and pass_at_k.json")
    if scan.torn_line is not None:
        print(f"warning: {args.completions}:{scan.torn_line}: the torn last line was not scored"
              + ("; exit code 1 (--strict)" if args.strict else ""), file=sys.stderr)
        return 1 if args.strict else 0
    return 0


def format_summary(metrics: dict[str, Any]) -> str:
    missing = metrics.get("n_missing_tasks") or 0
    lines = [f"{metrics['n_tasks']} tasks, {metrics['n_attempts']} attempts"
             + (f"; pass figures over the {metrics['n_dataset_tasks']} tasks of the dataset ({missing} unattempted "
                "count as failures)" if missing else "")]
    for key in FRACTION_METRICS:
        value = metrics.get(key)
        lines.append(f"  {key:20s} {'-' if value is None else f'{100 * value:.2f}%'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_score_arguments(argparse.ArgumentParser(description="Replay completions in the sandbox and score "
                                                                     "them (see the module docstring)."))
    return run_score(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
