"""The compact grid text format used in prompts.

A grid is written one row per line, each cell as its colour digit 0-9 with no separator, e.g. a 2x3 grid::

    012
    340

Every cell is one character, so a 30x30 grid costs 30 lines of 30 digits; the shape is stated next to it in prompts
("3x4" = 3 rows, 4 columns). `parse_grid` is the exact inverse of `format_grid`.

A prompt template may choose `spaced` instead (`PromptTemplate.grid_format`): the digits of a row separated by single
spaces (``0 1 2``), the rendering most LLM work on ARC uses, which a pretrained model reads as cells rather than as
one number (``868686``). With Qwen's tokenizer (one token per digit) it costs twice the tokens.
"""

from __future__ import annotations

from arc_trl.data.task import Grid


GRID_FORMATS = ("digits", "spaced")


def format_grid(grid: Grid, style: str = "digits") -> str:
    """Render a grid as lines of digits (`style` "spaced": the digits of a row separated by spaces)."""
    if style not in GRID_FORMATS:
        raise ValueError(f"grid format must be one of {list(GRID_FORMATS)}, got {style!r}")
    separator = " " if style == "spaced" else ""
    return "\n".join(separator.join(str(int(v)) for v in row) for row in grid)


def parse_grid(text: str) -> Grid:
    """Parse the output of `format_grid`, either style (surrounding blank lines and spaces are ignored)."""
    rows = [line.strip().replace(" ", "") for line in text.strip().splitlines() if line.strip()]
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
