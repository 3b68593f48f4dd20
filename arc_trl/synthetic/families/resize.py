"""Families that change the grid size: tile, upscale, downscale, crop_bbox."""

from __future__ import annotations

import numpy as np

from arc_trl.synthetic.difficulty import Difficulty
from arc_trl.synthetic.family import Family, Params, register
from arc_trl.synthetic.grids import noise, palette, random_grid, side

_REPS = [[1, 2], [2, 1], [2, 2], [1, 3], [3, 1], [3, 3], [2, 3], [3, 2]]


@register
class Tile(Family):
    name = "tile"
    rule = "repeat the grid ry times vertically and rx times horizontally (np.tile)"
    params_doc = "reps: [ry, rx] in 1-3 (not [1, 1])"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"reps": list(_REPS[int(rng.integers(len(_REPS)))])}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        ry, rx = params["reps"]
        limit = difficulty.max_output_side
        rows = (difficulty.min_side, min(difficulty.max_side, limit // ry))
        return random_grid(rng, rows, (difficulty.min_side, min(difficulty.max_side, limit // rx)))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        ry, rx = params["reps"]
        return np.concatenate([np.concatenate([grid] * rx, axis=1)] * ry, axis=0)

    def body(self, params: Params) -> str:
        ry, rx = params["reps"]
        return f"return np.tile(grid, ({ry}, {rx}))"

    def describe(self, params: Params) -> str:
        ry, rx = params["reps"]
        return f"The grid is repeated {ry} time(s) down and {rx} time(s) across."

    def rival_params(self) -> list[Params]:
        return [{"reps": list(reps)} for reps in _REPS]


@register
class Upscale(Family):
    name = "upscale"
    rule = "scale the grid up: every cell becomes a k x k block"
    params_doc = "factor: k in 2-3"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"factor": int(rng.integers(2, 4))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        hi = min(difficulty.max_side, difficulty.max_output_side // params["factor"])
        return random_grid(rng, (difficulty.min_side, hi))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        k = params["factor"]
        return np.kron(grid, np.ones((k, k), dtype=int))

    def body(self, params: Params) -> str:
        k = params["factor"]
        return f"return grid.repeat({k}, axis=0).repeat({k}, axis=1)"

    def describe(self, params: Params) -> str:
        k = params["factor"]
        return f"Every cell becomes a {k}x{k} block of its colour."

    def rival_params(self) -> list[Params]:
        return [{"factor": k} for k in (2, 3, 4)]


@register
class Downscale(Family):
    name = "downscale"
    rule = "the input is made of k x k blocks of one colour; output one cell per block"
    params_doc = "factor: k in 2-3 (only 2 when max_side < 6)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        factors = [k for k in (2, 3) if difficulty.max_side // k >= 2] or [2]
        return {"factor": int(rng.choice(factors))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        k = params["factor"]
        lo, hi = max(1, -(-difficulty.min_side // k)), max(1, difficulty.max_side // k)
        small = random_grid(rng, (lo, hi), density=float(rng.uniform(0.5, 1.0)))
        return small.repeat(k, axis=0).repeat(k, axis=1)

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        k = params["factor"]
        if grid.shape[0] % k or grid.shape[1] % k:
            raise ValueError(f"grid shape {grid.shape} is not a multiple of {k}")
        return grid.reshape(grid.shape[0] // k, k, grid.shape[1] // k, k)[:, 0, :, 0]

    def body(self, params: Params) -> str:
        k = params["factor"]
        return f"return grid[::{k}, ::{k}]"

    def describe(self, params: Params) -> str:
        k = params["factor"]
        return f"The input is made of {k}x{k} blocks; each block becomes one cell."

    def rival_params(self) -> list[Params]:
        return [{"factor": k} for k in (2, 3)]


@register
class CropBbox(Family):
    name = "crop_bbox"
    rule = "crop to the bounding box of the cells that are not the background colour"
    params_doc = "background: b in 0-9 (0 in 60% of tasks)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"background": 0 if rng.random() < 0.6 else int(rng.integers(1, 10))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        b = params["background"]
        rows = side(rng, max(3, difficulty.min_side), difficulty.max_side)
        cols = side(rng, max(3, difficulty.min_side), difficulty.max_side)
        height, width = side(rng, 1, rows - 1), side(rng, 1, cols - 1)
        top, left = side(rng, 0, rows - height), side(rng, 0, cols - width)
        grid = np.full((rows, cols), b, dtype=int)
        colors = palette(rng, side(rng, 1, 3), exclude=[b])
        patch = noise(rng, (height, width), colors, float(rng.uniform(0.5, 1.0)), background=b)
        grid[top : top + height, left : left + width] = patch
        return grid

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        mask = grid != params["background"]
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        if not len(rows):
            raise ValueError("the grid has no cell outside the background")
        return grid[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]

    def body(self, params: Params) -> str:
        return f"""
        rows, cols = np.nonzero(grid != {params["background"]})
        return grid[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
        """

    def describe(self, params: Params) -> str:
        b = params["background"]
        return f"The output is the smallest rectangle holding every cell whose colour is not the background {b}."

    def rival_params(self) -> list[Params]:
        return [{"background": b} for b in range(10)]
