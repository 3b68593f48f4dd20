"""The inputs of `arc-trl evaluate score`: the completions file, and its attempts matched to the dataset's tasks.

The completions file is streamed, never held in memory: a first pass checks every line and keeps only its task id
(and augmentation); the second reads each completion as its attempt is replayed (a few per worker in flight). A
last line torn by a run killed mid-write (no final newline, not valid JSON) is reported and skipped.
Anything else wrong raises `ScoreInputError` naming the file, line and problem.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arc_trl.data.augment import ID_SEPARATOR, Augmentation, split_task_id
from arc_trl.data.task import ArcTask


class ScoreInputError(ValueError):
    """A bad argument or input file; the message names the file, line and problem."""


@dataclass
class Attempt:
    line: int  # 1-based line number in the completions file
    task_id: str  # as written in the file
    completion: str | None  # None when it is streamed from the file at replay time
    original_id: str
    augmentation: Augmentation
    index: int = 0  # attempt number within its original task


@dataclass
class CompletionsScan:
    """What the first pass over a completions file found: every record without its `completion` text."""

    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)  # the small fields of each line, plus `line`
    torn_line: int | None = None  # the number of a last line cut short by a crash (skipped), if any


def _file_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based number, raw bytes with the newline) of each line of `path`, read one at a time."""
    try:
        with open(path, "rb") as f:
            yield from enumerate(f, start=1)
    except OSError as e:
        raise ScoreInputError(f"{path}: cannot read the completions file ({e})") from None


def _parse_line(path: Path, n: int, raw: bytes) -> dict[str, Any] | None:
    """The validated record of one line (None for a blank line). Raises ScoreInputError naming the line."""
    if not raw.strip():
        return None
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ScoreInputError(f"{path}:{n}: cannot read the completions file ({e})") from None
    except json.JSONDecodeError as e:
        raise ScoreInputError(f"{path}:{n}: invalid JSON ({e.msg})") from None
    if not isinstance(record, dict):
        raise ScoreInputError(f"{path}:{n}: expected a JSON object, got {type(record).__name__}")
    task_id = record.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise ScoreInputError(f"{path}:{n}: 'task_id' must be a non-empty string, got {task_id!r}")
    if not isinstance(record.get("completion"), str):
        found = type(record["completion"]).__name__ if "completion" in record else "nothing"
        raise ScoreInputError(f"{path}:{n}: 'completion' must be a string (the assistant text), got {found}")
    augmentation = record.get("augmentation")
    if augmentation is not None and not isinstance(augmentation, str):
        raise ScoreInputError(f"{path}:{n}: 'augmentation' must be a string, got {augmentation!r}")
    record["line"] = n
    return record


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw.decode("utf-8"))
        return True
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        return False


def scan_completions(path: str | Path) -> CompletionsScan:
    """Check every line of a completions JSONL file, one line in memory at a time; keep each record without its
    completion text. A last line without a final newline that does not parse is a write cut short (a run killed
    mid-write): it is reported on stderr and skipped. Raises ScoreInputError for anything else."""
    scan = CompletionsScan(Path(path))
    for n, raw in _file_lines(scan.path):
        if not raw.endswith(b"\n") and raw.strip() and not _is_json(raw):  # only the last line lacks a newline
            scan.torn_line = n
            print(f"warning: {scan.path}:{n}: the last line is incomplete (the run that wrote it was probably "
                  f"killed mid-write); it is not scored", file=sys.stderr)
            break
        record = _parse_line(scan.path, n, raw)
        if record is not None:
            del record["completion"]
            scan.records.append(record)
    if not scan.records:
        what = f"only a torn line {scan.torn_line}" if scan.torn_line else "the file is empty"
        raise ScoreInputError(f"{scan.path}: no completions ({what})")
    return scan


def stream_completions(path: str | Path, lines: Iterable[int]) -> Iterator[str]:
    """The completion texts of the given lines (ascending), read from `path` one line at a time."""
    path = Path(path)
    wanted = iter(lines)
    target = next(wanted, None)
    for n, raw in _file_lines(path):
        if target is None:
            return
        if n == target:
            record = _parse_line(path, n, raw)
            if record is None:
                raise ScoreInputError(f"{path}:{n}: the file changed while it was being scored")
            yield record["completion"]
            target = next(wanted, None)
    if target is not None:
        raise ScoreInputError(f"{path}:{target}: the file changed while it was being scored (line gone)")


def read_completions(path: str | Path) -> list[dict[str, Any]]:
    """The records of a completions JSONL file, completions included, each with its `line` number (a torn last
    line is skipped with a warning). Raises ScoreInputError. `arc-trl evaluate score` streams instead."""
    scan = scan_completions(path)
    texts = stream_completions(scan.path, [r["line"] for r in scan.records])
    return [{**record, "completion": text} for record, text in zip(scan.records, texts, strict=True)]


def resolve_attempts(records: list[dict[str, Any]], tasks: list[ArcTask], where: str) -> list[Attempt]:
    """Match every record to a task of the dataset (augmented ids included). Raises ScoreInputError naming the line."""
    by_id = {t.id: t for t in tasks}
    attempts, counts = [], Counter()
    for record in records:
        n, task_id = record["line"], record["task_id"]
        try:
            field = Augmentation.from_string(record.get("augmentation") or "")
            if task_id in by_id:
                original, augmentation = task_id, field
            elif ID_SEPARATOR in task_id:
                original, from_id = split_task_id(task_id)
                augmentation = field if not field.is_identity else from_id
            else:
                original, augmentation = task_id, field
        except ValueError as e:
            raise ScoreInputError(f"{where}:{n}: task {task_id!r}: {e}") from None
        if original not in by_id:
            examples = ", ".join(sorted(by_id)[:3])
            raise ScoreInputError(f"{where}:{n}: unknown task id {task_id!r}: not in the dataset ({len(by_id)} tasks, "
                                  f"e.g. {examples})")
        attempts.append(Attempt(n, task_id, record.get("completion"), original, augmentation, counts[original]))
        counts[original] += 1
    return attempts


def task_for(attempt: Attempt, by_id: dict[str, ArcTask], cache: dict[tuple[str, str], ArcTask]) -> ArcTask:
    """The task the attempt was made on (the augmented copy when it has an augmentation)."""
    if attempt.augmentation.is_identity:
        return by_id[attempt.original_id]
    key = (attempt.original_id, attempt.augmentation.to_string())
    if key not in cache:
        cache[key] = attempt.augmentation.apply_task(by_id[attempt.original_id])
    return cache[key]
