"""Grid checks inside the sandbox child: turn what model code returns or submits into plain lists of ints.

Same rules as `arc_trl.data.task.grid_problem` (a test checks that they agree), written again here because the child
imports nothing from `arc_trl`. Values come from hostile code, so every message names what is wrong and the
result holds only exact `int` cells.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_SIDE = 30
NUM_COLORS = 10


class GridError(ValueError):
    """A value is not a valid ARC grid; the message says why."""


def to_grid(value: Any) -> list[list[int]]:
    """Validate `value` (list of lists / tuples of ints, or a 2-D integer numpy array) and return a plain grid."""
    if isinstance(value, np.ndarray):
        if value.ndim != 2:
            raise GridError(f"expected a 2-D array, got an array of shape {tuple(value.shape)}")
        if value.dtype == np.bool_ or not np.issubdtype(value.dtype, np.integer):
            raise GridError(f"array has dtype {value.dtype}; colours must be integers (use .astype(int))")
        if value.shape[0] > MAX_SIDE or value.shape[1] > MAX_SIDE:
            raise GridError(f"grid is {value.shape[0]}x{value.shape[1]} (max {MAX_SIDE}x{MAX_SIDE})")
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise GridError(f"a grid must be a non-empty list of rows, got {_describe(value)}")
    if len(value) > MAX_SIDE:
        raise GridError(f"grid has {len(value)} rows (max {MAX_SIDE})")
    grid: list[list[int]] = []
    width = None
    for r, row in enumerate(value):
        if isinstance(row, np.ndarray):
            row = row.tolist()
        if not isinstance(row, (list, tuple)) or len(row) == 0:
            raise GridError(f"row {r} must be a non-empty list of colours, got {_describe(row)}")
        if width is None:
            width = len(row)
            if width > MAX_SIDE:
                raise GridError(f"grid has {width} columns (max {MAX_SIDE})")
        elif len(row) != width:
            raise GridError(f"grid is not rectangular (row 0 has {width} cells, row {r} has {len(row)})")
        out_row = []
        for c, cell in enumerate(row):
            if isinstance(cell, (bool, np.bool_)) or not isinstance(cell, (int, np.integer)):
                raise GridError(f"cell ({r},{c}) is {_describe(cell)}, not an integer colour")
            colour = int(cell)
            if not 0 <= colour < NUM_COLORS:
                raise GridError(f"cell ({r},{c}) has colour {colour} outside 0..9")
            out_row.append(colour)
        grid.append(out_row)
    return grid


def looks_like_single_grid(value: Any) -> bool:
    """True for a 2-D array or a list whose first row is a sequence of scalars (not a list of grids)."""
    if isinstance(value, np.ndarray):
        return value.ndim == 2
    if isinstance(value, (list, tuple)) and value:
        first = value[0]
        if isinstance(first, np.ndarray):
            return first.ndim == 1
        if isinstance(first, (list, tuple)):
            return len(first) == 0 or not isinstance(first[0], (list, tuple, np.ndarray))
    return False


def to_submission(value: Any, n_test: int) -> list[list[list[int]]]:
    """Validate the argument of SUBMIT: one grid per test input (a single grid is accepted when n_test == 1)."""
    if n_test == 1 and looks_like_single_grid(value):
        value = [value]
    if isinstance(value, np.ndarray):
        if value.ndim != 3:
            raise GridError(f"expected a list of {n_test} grids, got an array of shape {tuple(value.shape)}")
        value = list(value)
    if not isinstance(value, (list, tuple)):
        raise GridError(f"expected a list of {n_test} grid(s), one per test input, got {_describe(value)}")
    if len(value) != n_test:
        noun = "grid" if n_test == 1 else "grids"
        raise GridError(f"expected {n_test} {noun} (one per test input), got {len(value)}")
    grids = []
    for i, grid in enumerate(value):
        try:
            grids.append(to_grid(grid))
        except GridError as e:
            raise GridError(f"grid {i}: {e}" if n_test > 1 else str(e)) from None
    return grids


def _describe(value: Any) -> str:
    name = type(value).__name__
    if isinstance(value, (int, float, str, np.generic)) and not isinstance(value, bool):
        text = repr(value)
        return text if len(text) <= 40 else f"a {name}"
    if isinstance(value, bool):
        return repr(value)
    return f"a {name}"
