"""Families about objects and regions: largest_object, boolean_halves."""

from __future__ import annotations

from collections import deque

import numpy as np

from arc_trl.synthetic.difficulty import Difficulty
from arc_trl.synthetic.family import Family, Params, register
from arc_trl.synthetic.grids import palette, side

_NEIGHBOURS = ((1, 0), (-1, 0), (0, 1), (0, -1))


def connected_objects(grid: np.ndarray) -> list[list[tuple[int, int]]]:
    """The 4-connected single-colour objects of non-zero cells, each a list of (row, col), in row-major order."""
    labels = np.zeros(grid.shape, dtype=bool)
    objects = []
    for r, c in np.argwhere(grid != 0):
        if labels[r, c]:
            continue
        labels[r, c] = True
        queue, cells = deque([(int(r), int(c))]), []
        while queue:
            y, x = queue.popleft()
            cells.append((y, x))
            for dy, dx in _NEIGHBOURS:
                ny, nx = y + dy, x + dx
                inside = 0 <= ny < grid.shape[0] and 0 <= nx < grid.shape[1]
                if inside and not labels[ny, nx] and grid[ny, nx] == grid[y, x]:
                    labels[ny, nx] = True
                    queue.append((ny, nx))
        objects.append(cells)
    return objects


def _grow_blob(rng: np.random.Generator, shape: tuple[int, int], size: int, blocked: np.ndarray) -> list | None:
    """A random 4-connected set of `size` free cells, or None when it does not fit."""
    free = np.argwhere(~blocked)
    if not len(free):
        return None
    blob = [tuple(int(v) for v in free[int(rng.integers(len(free)))])]
    while len(blob) < size:
        frontier = sorted(
            {
                (r + dy, c + dx)
                for r, c in blob
                for dy, dx in _NEIGHBOURS
                if 0 <= r + dy < shape[0] and 0 <= c + dx < shape[1] and not blocked[r + dy, c + dx]
            }
            - set(blob)
        )
        if not frontier:
            return None
        blob.append(frontier[int(rng.integers(len(frontier)))])
    return blob


@register
class LargestObject(Family):
    name = "largest_object"
    rule = "extract the largest (or smallest) 4-connected single-colour object, cropped to its bounding box"
    params_doc = "pick: largest or smallest (objects have distinct sizes; background is 0)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"pick": str(rng.choice(["largest", "smallest"]))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        lo = max(3, difficulty.min_side)
        shape = (side(rng, lo, difficulty.max_side), side(rng, lo, difficulty.max_side))
        count = side(rng, 2, 4)
        max_size = max(count, min(10, shape[0] * shape[1] // 6))
        sizes = sorted(rng.choice(np.arange(1, max_size + 1), size=count, replace=False).tolist(), reverse=True)
        colors = palette(rng, side(rng, 1, 3))
        grid = np.zeros(shape, dtype=int)
        blocked = np.zeros(shape, dtype=bool)  # objects and their 8-neighbourhoods: objects never touch
        for size in sizes:
            blob = _grow_blob(rng, shape, int(size), blocked)
            if blob is None:
                break
            color = colors[int(rng.integers(len(colors)))]
            for r, c in blob:
                grid[r, c] = color
                blocked[max(r - 1, 0) : r + 2, max(c - 1, 0) : c + 2] = True
        if len(connected_objects(grid)) < 2:
            raise ValueError("could not place two objects")
        return grid

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        objects = connected_objects(grid)
        if not objects:
            raise ValueError("the grid has no object")
        sizes = [len(cells) for cells in objects]
        target = max(sizes) if params["pick"] == "largest" else min(sizes)
        if sizes.count(target) > 1:
            raise ValueError(f"the {params['pick']} object is not unique")
        cells = np.array(objects[sizes.index(target)])
        top, left = cells.min(axis=0)
        out = np.zeros(tuple(cells.max(axis=0) - cells.min(axis=0) + 1), dtype=int)
        out[cells[:, 0] - top, cells[:, 1] - left] = grid[cells[:, 0], cells[:, 1]]
        return out

    def body(self, params: Params) -> str:
        better = ">" if params["pick"] == "largest" else "<"
        return f"""
        seen = np.zeros(grid.shape, dtype=bool)
        best = None
        for start in zip(*np.nonzero(grid)):
            if seen[start]:
                continue
            seen[start] = True
            stack, cells = [start], []
            while stack:
                r, c = stack.pop()
                cells.append((r, c))
                for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    inside = 0 <= nr < grid.shape[0] and 0 <= nc < grid.shape[1]
                    if inside and not seen[nr, nc] and grid[nr, nc] == grid[r, c]:
                        seen[nr, nc] = True
                        stack.append((nr, nc))
            if best is None or len(cells) {better} len(best):
                best = cells
        rows, cols = zip(*best)
        out = np.zeros((max(rows) - min(rows) + 1, max(cols) - min(cols) + 1), dtype=int)
        for r, c in best:
            out[r - min(rows), c - min(cols)] = grid[r, c]
        return out
        """

    def describe(self, params: Params) -> str:
        return (
            f"The output is the {params['pick']} object (4-connected cells of one colour), cropped to its bounding box"
            " with 0 around it."
        )

    def rival_params(self) -> list[Params]:
        return [{"pick": "largest"}, {"pick": "smallest"}]


_OPS = {"and": "left & right", "or": "left | right", "xor": "left ^ right", "nor": "~(left | right)"}
_OP_WORDS = {
    "and": "in both halves",
    "or": "in at least one half",
    "xor": "in exactly one half",
    "nor": "in neither half",
}


@register
class BooleanHalves(Family):
    name = "boolean_halves"
    rule = "two halves split by a divider column are combined cell by cell with a logical operation"
    params_doc = "op: and, or, xor or nor; color: output colour c in 1-9 (0 elsewhere)"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"op": str(rng.choice(list(_OPS))), "color": int(rng.integers(1, 10))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        rows = side(rng, difficulty.min_side, difficulty.max_side)
        width = side(rng, max(1, (difficulty.min_side - 1) // 2), (difficulty.max_side - 1) // 2)
        left_color, right_color, divider = palette(rng, 3, exclude=[params["color"]])
        density = float(rng.uniform(0.3, 0.7))
        left = np.where(rng.random((rows, width)) < density, left_color, 0)
        right = np.where(rng.random((rows, width)) < density, right_color, 0)
        return np.hstack([left, np.full((rows, 1), divider), right]).astype(int)

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        width = grid.shape[1] // 2
        if grid.shape[1] != 2 * width + 1:
            raise ValueError("the grid has no middle divider column")
        left, right = grid[:, :width] != 0, grid[:, width + 1 :] != 0
        combined = {"and": left & right, "or": left | right, "xor": left != right, "nor": ~left & ~right}
        return np.where(combined[params["op"]], params["color"], 0)

    def body(self, params: Params) -> str:
        return f"""
        w = grid.shape[1] // 2
        left, right = grid[:, :w] != 0, grid[:, w + 1:] != 0
        return np.where({_OPS[params["op"]]}, {params["color"]}, 0)
        """

    def describe(self, params: Params) -> str:
        return (
            f"The input is two halves split by a middle column; an output cell is {params['color']} where the cell is "
            f"coloured {_OP_WORDS[params['op']]}, else 0."
        )

    def rival_params(self) -> list[Params]:
        return [{"op": op, "color": c} for op in _OPS for c in range(1, 10)]

    def informative(self, train_inputs: list[np.ndarray], test_inputs: list[np.ndarray], params: Params) -> bool:
        # the output colour must be shown: some train output has a cell of it
        return any((self.apply(g, params) == params["color"]).any() for g in train_inputs)
