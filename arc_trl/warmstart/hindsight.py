"""Hindsight relabelling: a program that ran on every input of a task defines a new task, the same inputs with the
program's own outputs, which it solves (SOAR, arXiv 2507.14172; the research log's "search and learn").

A relabelled task keeps the original's train and test inputs; its outputs are the program's. Programs whose outputs
teach nothing are refused, each with its reason: an output missing or not a grid, the identity on every input,
the same output for every input.
"""

from __future__ import annotations

from typing import Any

from arc_trl.data.task import ArcTask, Grid, Pair, normalize_grid

REASONS = ("missing_output", "identity", "constant")


def _grids(values: list[Any] | None, n: int) -> list[Grid] | None:
    if values is None or len(values) != n:
        return None
    try:
        return [normalize_grid(g) for g in values]
    except (TypeError, ValueError):
        return None


def relabel(task: ArcTask, train_predictions: list[Any] | None, test_predictions: list[Any] | None,
            suffix: str) -> tuple[ArcTask | None, str | None]:
    """(the relabelled task `<id>~<suffix>`, None) or (None, the reason it is refused: one of `REASONS`)."""
    train = _grids(train_predictions, len(task.train))
    test = _grids(test_predictions, len(task.test_inputs))
    if train is None or test is None:
        return None, "missing_output"
    inputs = [normalize_grid(p.input) for p in task.train] + [normalize_grid(g) for g in task.test_inputs]
    outputs = train + test
    if outputs == inputs:
        return None, "identity"
    if all(o == outputs[0] for o in outputs):
        return None, "constant"
    relabelled = ArcTask(
        id=f"{task.id}~{suffix}", train=[Pair(p.input, out) for p, out in zip(task.train, train)],
        test_inputs=list(task.test_inputs), test_outputs=test, source=f"hindsight:{task.source or ''}",
        metadata={"hindsight_of": task.id},
    )
    return relabelled, None
