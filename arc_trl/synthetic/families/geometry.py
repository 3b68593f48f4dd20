"""Geometric families: rotate, flip, transpose, roll, mirror_concat."""

from __future__ import annotations

import numpy as np

from arc_trl.synthetic.difficulty import Difficulty
from arc_trl.synthetic.family import Family, Params, register
from arc_trl.synthetic.grids import random_grid

_ROTATIONS = {1: "90 degrees counterclockwise", 2: "180 degrees", 3: "90 degrees clockwise"}


@register
class Rotate(Family):
    name = "rotate"
    rule = "rotate the grid by k quarter turns (np.rot90)"
    params_doc = "k: 1 (90 deg counterclockwise), 2 (180 deg), 3 (90 deg clockwise)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"k": int(rng.integers(1, 4))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        return random_grid(rng, (difficulty.min_side, difficulty.max_side))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        return np.rot90(grid, params["k"])

    def body(self, params: Params) -> str:
        return f"return np.rot90(grid, {params['k']})"

    def describe(self, params: Params) -> str:
        return f"The grid is rotated {_ROTATIONS[params['k']]}."

    def rival_params(self) -> list[Params]:
        return [{"k": k} for k in (1, 2, 3)]


@register
class Flip(Family):
    name = "flip"
    rule = "mirror the grid left-right or top-bottom"
    params_doc = "axis: horizontal (mirror left-right, np.fliplr) or vertical (mirror top-bottom, np.flipud)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"axis": str(rng.choice(["horizontal", "vertical"]))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        return random_grid(rng, (difficulty.min_side, difficulty.max_side))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        return grid[:, ::-1] if params["axis"] == "horizontal" else grid[::-1, :]

    def body(self, params: Params) -> str:
        return "return np.fliplr(grid)" if params["axis"] == "horizontal" else "return np.flipud(grid)"

    def describe(self, params: Params) -> str:
        side = "left to right" if params["axis"] == "horizontal" else "top to bottom"
        return f"The grid is mirrored {side}."

    def rival_params(self) -> list[Params]:
        return [{"axis": "horizontal"}, {"axis": "vertical"}]


@register
class Transpose(Family):
    name = "transpose"
    rule = "reflect the grid across its main diagonal or its anti-diagonal"
    params_doc = "diagonal: main (grid.T) or anti (grid[::-1, ::-1].T)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"diagonal": str(rng.choice(["main", "anti"]))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        return random_grid(rng, (difficulty.min_side, difficulty.max_side))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        return np.transpose(grid) if params["diagonal"] == "main" else np.transpose(np.rot90(grid, 2))

    def body(self, params: Params) -> str:
        return "return grid.T" if params["diagonal"] == "main" else "return grid[::-1, ::-1].T"

    def describe(self, params: Params) -> str:
        which = "main diagonal (rows become columns)" if params["diagonal"] == "main" else "anti-diagonal"
        return f"The grid is reflected across its {which}."

    def rival_params(self) -> list[Params]:
        return [{"diagonal": "main"}, {"diagonal": "anti"}]


_SHIFTS = [(0, 1), (0, -1), (0, 2), (0, -2), (1, 0), (-1, 0), (2, 0), (-2, 0), (1, 1), (-1, -1), (1, -1), (-1, 1)]


@register
class Roll(Family):
    name = "roll"
    rule = "shift every cell by (dy, dx) with wrap-around (np.roll)"
    params_doc = "shift: [dy, dx], one of +-1/+-2 along one axis or +-1 along both"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        dy, dx = _SHIFTS[int(rng.integers(len(_SHIFTS)))]
        return {"shift": [dy, dx]}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        # A side of at least |k| + 3 keeps the shift distinguishable from every other shift of at most 2 cells.
        dy, dx = params["shift"]
        lo_rows = abs(dy) + 3 if dy else difficulty.min_side
        lo_cols = abs(dx) + 3 if dx else difficulty.min_side
        return random_grid(rng, (lo_rows, difficulty.max_side), (lo_cols, difficulty.max_side))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        dy, dx = params["shift"]
        return np.roll(np.roll(grid, dy, axis=0), dx, axis=1)

    def body(self, params: Params) -> str:
        dy, dx = params["shift"]
        return f"return np.roll(grid, ({dy}, {dx}), axis=(0, 1))"

    def describe(self, params: Params) -> str:
        dy, dx = params["shift"]
        moves = []
        if dy:
            moves.append(f"{abs(dy)} {'down' if dy > 0 else 'up'}")
        if dx:
            moves.append(f"{abs(dx)} {'right' if dx > 0 else 'left'}")
        return f"Every cell moves {' and '.join(moves)}, wrapping around the edges."

    def rival_params(self) -> list[Params]:
        return [{"shift": [dy, dx]} for dy in range(-2, 3) for dx in range(-2, 3) if dy or dx]


_MIRROR_CODE = {
    "right": "np.hstack([grid, grid[:, ::-1]])",
    "left": "np.hstack([grid[:, ::-1], grid])",
    "below": "np.vstack([grid, grid[::-1]])",
    "above": "np.vstack([grid[::-1], grid])",
}


@register
class MirrorConcat(Family):
    name = "mirror_concat"
    rule = "attach the mirror image of the grid on one side (output is twice as wide or tall)"
    params_doc = "side: right, left, below or above"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"side": str(rng.choice(list(_MIRROR_CODE)))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        half = min(difficulty.max_side, difficulty.max_output_side // 2)
        if params["side"] in ("right", "left"):
            return random_grid(rng, (difficulty.min_side, difficulty.max_side), (difficulty.min_side, half))
        return random_grid(rng, (difficulty.min_side, half), (difficulty.min_side, difficulty.max_side))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        side = params["side"]
        mirrored = np.fliplr(grid) if side in ("right", "left") else np.flipud(grid)
        first, second = (grid, mirrored) if side in ("right", "below") else (mirrored, grid)
        return np.concatenate([first, second], axis=1 if side in ("right", "left") else 0)

    def body(self, params: Params) -> str:
        return f"return {_MIRROR_CODE[params['side']]}"

    def describe(self, params: Params) -> str:
        where = params["side"] if params["side"] in ("below", "above") else f"on the {params['side']}"
        return f"The output is the input with its mirror image attached {where}."

    def rival_params(self) -> list[Params]:
        return [{"side": side} for side in _MIRROR_CODE]
