"""Per-grid scores: validity, exact match and pixel accuracy. Pure functions, safe on hostile input."""

from __future__ import annotations

from typing import Any

from arc_trl.data.task import Grid, is_valid_grid


def exact_match(pred: Any, target: Grid) -> bool:
    """True when `pred` is a valid grid equal to `target` cell by cell."""
    if not is_valid_grid(pred):
        return False
    if hasattr(pred, "tolist"):
        pred = pred.tolist()
    return [list(map(int, row)) for row in pred] == target


def pixel_accuracy(pred: Any, target: Grid) -> float:
    """Fraction of cells equal to `target`; 0.0 when `pred` is invalid or its shape differs."""
    if not is_valid_grid(pred):
        return 0.0
    if hasattr(pred, "tolist"):
        pred = pred.tolist()
    if len(pred) != len(target) or len(pred[0]) != len(target[0]):
        return 0.0
    cells = len(target) * len(target[0])
    same = sum(int(p == t) for prow, trow in zip(pred, target) for p, t in zip(prow, trow))
    return same / cells
