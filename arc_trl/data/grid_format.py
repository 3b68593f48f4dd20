"""The compact grid text format used in prompts.

A grid is written one row per line, each cell as its colour digit 0-9 with no separator, e.g. a 2x3 grid::

    012
    340

Every cell is one character, so a 30x30 grid costs 30 lines of 30 digits; the shape is stated next to it in prompts
("3x4" = 3 rows, 4 columns). `parse_grid` is the exact inverse of `format_grid`.
"""

from __future__ import annotations

from arc_trl.data.task import Grid


def format_grid(grid: Grid) -> str:
    """Render a grid as lines of digits."""
    return "\n".join("".join(str(int(v)) for v in row) for row in grid)


def parse_grid(text: str) -> Grid:
    """Parse the output of `format_grid` (surrounding blank lines and spaces are ignored)."""
    rows = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not rows:
        raise ValueError("empty grid text")
    grid = []
    for r, line in enumerate(rows):
        if not line.isdigit():
            raise ValueError(f"row {r} contains non-digit characters: {line!r}")
        grid.append([int(ch) for ch in line])
    if len({len(row) for row in grid}) != 1:
        raise ValueError("rows have different lengths")
    return grid


def grid_shape(grid: Grid) -> str:
    """'HxW' (rows x columns)."""
    return f"{len(grid)}x{len(grid[0])}"
