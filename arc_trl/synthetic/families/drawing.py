"""Families that move or draw cells: gravity, extend_rays, draw_border."""

from __future__ import annotations

import numpy as np

from arc_trl.synthetic.difficulty import Difficulty
from arc_trl.synthetic.family import Family, Params, register
from arc_trl.synthetic.grids import palette, random_grid, side

DIRECTIONS = ("down", "up", "left", "right")

_GRAVITY_CODE = {
    "down": ("c", "grid.shape[1]", "grid[:, c]", "out[len(line) - len(cells):, c]"),
    "up": ("c", "grid.shape[1]", "grid[:, c]", "out[:len(cells), c]"),
    "left": ("r", "grid.shape[0]", "grid[r]", "out[r, :len(cells)]"),
    "right": ("r", "grid.shape[0]", "grid[r]", "out[r, len(line) - len(cells):]"),
}


@register
class Gravity(Family):
    name = "gravity"
    rule = "coloured cells fall in one direction until they stack against the edge (order kept)"
    params_doc = "direction: down, up, left or right (background is 0)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"direction": str(rng.choice(DIRECTIONS))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        size = (difficulty.min_side, difficulty.max_side)
        return random_grid(rng, size, colors=palette(rng, side(rng, 1, 3)), density=float(rng.uniform(0.15, 0.5)))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        direction = params["direction"]
        axis = 0 if direction in ("down", "up") else 1
        # a stable sort on "is background" (or "is coloured") moves the coloured cells to one end, keeping order
        key = (grid != 0) if direction in ("down", "right") else (grid == 0)
        order = np.argsort(key, axis=axis, kind="stable")
        return np.take_along_axis(grid, order, axis=axis)

    def body(self, params: Params) -> str:
        index, count, line, target = _GRAVITY_CODE[params["direction"]]
        return f"""
        out = np.zeros_like(grid)
        for {index} in range({count}):
            line = {line}
            cells = line[line != 0]
            {target} = cells
        return out
        """

    def describe(self, params: Params) -> str:
        return f"Every coloured cell falls {params['direction']} until it stacks against the edge, keeping its order."

    def rival_params(self) -> list[Params]:
        return [{"direction": d} for d in DIRECTIONS]


_RAY_CODE = {"down": "out[r:, c]", "up": "out[:r + 1, c]", "right": "out[r, c:]", "left": "out[r, :c + 1]"}


@register
class ExtendRays(Family):
    name = "extend_rays"
    rule = "every coloured cell draws a line of its colour to the edge in one direction"
    params_doc = "direction: down, up, left or right (background is 0; at most one cell per line in inputs)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"direction": str(rng.choice(DIRECTIONS))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        rows, cols = (
            side(rng, difficulty.min_side, difficulty.max_side),
            side(rng, difficulty.min_side, difficulty.max_side),
        )
        vertical = params["direction"] in ("down", "up")
        lines, length = (cols, rows) if vertical else (rows, cols)
        count = side(rng, 1, min(4, lines))
        colors = palette(rng, side(rng, 1, 3))
        grid = np.zeros((rows, cols), dtype=int)
        for line in rng.choice(lines, size=count, replace=False):
            position = int(rng.integers(length))
            cell = (position, line) if vertical else (line, position)
            grid[cell] = colors[int(rng.integers(len(colors)))]
        return grid

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        out = grid.copy()
        direction = params["direction"]
        for r, c in np.argwhere(grid != 0):  # row-major order, like np.nonzero
            color = grid[r, c]
            if direction == "down":
                out[r:, c] = color
            elif direction == "up":
                out[: r + 1, c] = color
            elif direction == "right":
                out[r, c:] = color
            else:
                out[r, : c + 1] = color
        return out

    def body(self, params: Params) -> str:
        return f"""
        out = grid.copy()
        for r, c in zip(*np.nonzero(grid)):
            {_RAY_CODE[params["direction"]]} = grid[r, c]
        return out
        """

    def describe(self, params: Params) -> str:
        return f"Every coloured cell extends a line of its colour {params['direction']} to the edge of the grid."

    def rival_params(self) -> list[Params]:
        return [{"direction": d} for d in DIRECTIONS]


@register
class DrawBorder(Family):
    name = "draw_border"
    rule = "paint the outermost ring of cells in colour c"
    params_doc = "color: c in 1-9 (inputs do not contain c)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"color": int(rng.integers(1, 10))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        colors = palette(rng, side(rng, 1, 3), exclude=[params["color"]])
        size = (max(3, difficulty.min_side), difficulty.max_side)
        return random_grid(rng, size, colors=colors, density=float(rng.uniform(0.1, 0.7)))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        out = np.full_like(grid, params["color"])
        out[1:-1, 1:-1] = grid[1:-1, 1:-1]
        return out

    def body(self, params: Params) -> str:
        c = params["color"]
        return f"""
        out = grid.copy()
        out[[0, -1], :] = {c}
        out[:, [0, -1]] = {c}
        return out
        """

    def describe(self, params: Params) -> str:
        return f"The outermost ring of cells is painted with colour {params['color']}."

    def rival_params(self) -> list[Params]:
        return [{"color": c} for c in range(10)]
