"""Majority voting over the test predictions of many attempts at a task.

For each test input, every valid predicted grid of every attempt is one vote; identical grids pool their votes. The
ranking is by vote count, ties broken by first occurrence (attempts in `attempt` index order, then file order).
Invalid predictions (null, malformed, colours outside 0..9, floats, ...) cast no vote.

Augmented attempts predicted grids in the augmented frame; each grid is mapped back to the original orientation and
colours before voting. A record is augmented when it carries a non-empty `"augmentation"` string (format of
`arc_trl.data.augment`, e.g. "d3c0412356789") or when its `task_id` is an augmented id "<original id>|<augmentation>";
its votes count for the original task id. The default inverter is `Augmentation.from_string(a).invert_grid(grid)`;
any `invert(grid, augmentation) -> grid` can replace it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from arc_trl.data.augment import ID_SEPARATOR, Augmentation, split_task_id
from arc_trl.data.task import Grid, normalize_grid

Inverter = Callable[[Grid, str], Grid]
Ranking = list[tuple[Grid, int]]  # distinct grids with their vote counts, most voted first


def invert_augmentation(grid: Grid, augmentation: str) -> Grid:
    """Map a grid predicted on a task augmented with `augmentation` back to the original task."""
    return Augmentation.from_string(augmentation).invert_grid(grid)


def record_origin(record: Mapping[str, Any]) -> tuple[str, str]:
    """(original task id, augmentation string; "" for none) of a per-attempt record."""
    if "task_id" not in record:
        raise ValueError(f"per-attempt record without a 'task_id': {str(dict(record))[:200]}")
    task_id = str(record["task_id"])
    augmentation = record.get("augmentation") or ""
    if ID_SEPARATOR in task_id:
        try:
            original, from_id = split_task_id(task_id)
        except ValueError:  # a '|' that is not an augmentation suffix: a plain id
            return task_id, augmentation
        return original, augmentation or from_id.to_string()
    return task_id, augmentation


def as_valid_grid(prediction: Any) -> Grid | None:
    """The prediction as a plain grid, or None when it is not a valid ARC grid (never raises)."""
    if prediction is None:
        return None
    try:
        return normalize_grid(prediction)
    except Exception:  # model output is hostile: any failure just means "no vote"
        return None


def rank_predictions(predictions: Iterable[Any]) -> Ranking:
    """Distinct valid grids with their vote counts, most voted first; ties keep first-occurrence order."""
    votes: dict[tuple[tuple[int, ...], ...], list[Any]] = {}
    for prediction in predictions:
        grid = as_valid_grid(prediction)
        if grid is None:
            continue
        key = tuple(tuple(row) for row in grid)
        if key in votes:
            votes[key][1] += 1
        else:
            votes[key] = [grid, 1]
    # sorted() is stable and dicts keep insertion order, so equal counts stay in first-occurrence order.
    return [(grid, count) for grid, count in sorted(votes.values(), key=lambda item: -item[1])]


def _attempt_order(record: Mapping[str, Any]) -> float:
    attempt = record.get("attempt")
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else float("inf")


def attempt_predictions(
    record: Mapping[str, Any], n_test: int, invert: Inverter = invert_augmentation
) -> list[Grid | None]:
    """The `n_test` test predictions of one attempt in the original frame; None where there is no valid grid."""
    raw = record.get("test_predictions")
    raw = raw if isinstance(raw, list) else []
    grids = [as_valid_grid(raw[i]) if i < len(raw) else None for i in range(n_test)]
    _, augmentation = record_origin(record)
    if not augmentation:
        return grids
    mapped: list[Grid | None] = []
    for i, grid in enumerate(grids):
        if grid is None:
            mapped.append(None)
            continue
        try:
            mapped.append(normalize_grid(invert(grid, augmentation)))
        except Exception as e:  # our own augmentation strings: a failure here is a bug or a corrupt file
            where = f"task {record.get('task_id')!r} attempt {record.get('attempt')!r} test {i}"
            raise ValueError(f"{where}: cannot invert augmentation {augmentation!r}: {e}") from e
    return mapped


def vote_task(
    records: Iterable[Mapping[str, Any]], n_test: int, invert: Inverter = invert_augmentation
) -> list[Ranking]:
    """One ranking per test input from the attempts (per_attempt records) of a single task."""
    ordered = sorted(records, key=_attempt_order)
    per_attempt = [attempt_predictions(record, n_test, invert) for record in ordered]
    return [rank_predictions(predictions[i] for predictions in per_attempt) for i in range(n_test)]


def group_by_task(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Records grouped by original task id (augmented ids pooled with their original), in first-seen order."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(record_origin(record)[0], []).append(record)
    return groups


def vote(
    records: Iterable[Mapping[str, Any]],
    n_test: Mapping[str, int] | None = None,
    invert: Inverter = invert_augmentation,
) -> dict[str, list[Ranking]]:
    """{original task_id: one ranking per test input}. `n_test` gives each task's number of test inputs (default:
    the longest `test_predictions` list among its attempts)."""
    result = {}
    for task_id, task_records in group_by_task(records).items():
        if n_test is not None and task_id in n_test:
            count = n_test[task_id]
        else:
            lengths = [len(r["test_predictions"]) for r in task_records if isinstance(r.get("test_predictions"), list)]
            count = max(lengths, default=0)
        result[task_id] = vote_task(task_records, count, invert)
    return result
