"""Colour families: color_map, color_swap, most_frequent_color, count_bar."""

from __future__ import annotations

import numpy as np

from arc_trl.synthetic.difficulty import Difficulty
from arc_trl.synthetic.family import Family, Params, register
from arc_trl.synthetic.grids import palette, random_grid, side


def _colors_of(grids: list[np.ndarray]) -> set[int]:
    return {int(c) for g in grids for c in np.unique(g)}


def _colors_demonstrated(train_inputs: list[np.ndarray], test_inputs: list[np.ndarray], needed: list[int]) -> bool:
    """Every colour of `needed` and every colour of the test inputs appears in some train input."""
    seen = _colors_of(train_inputs)
    return set(needed) <= seen and _colors_of(test_inputs) <= seen


@register
class ColorMap(Family):
    name = "color_map"
    rule = "recolour 2-3 colours by a fixed mapping, other colours unchanged"
    params_doc = "mapping: [[src, dst], ...], 2-3 distinct source colours 1-9, each dst any other colour 0-9"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        sources = sorted(palette(rng, side(rng, 2, 3)))
        mapping = [[src, int(rng.choice([c for c in range(10) if c != src]))] for src in sources]
        return {"mapping": mapping}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        sources = [src for src, _ in params["mapping"]]
        colors = sources + palette(rng, side(rng, 0, 2), exclude=sources)
        size = (difficulty.min_side, difficulty.max_side)
        return random_grid(rng, size, colors=colors, density=float(rng.uniform(0.5, 1.0)))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        table = np.arange(10)
        for src, dst in params["mapping"]:
            table[src] = dst
        return table[grid]

    def body(self, params: Params) -> str:
        pairs = ", ".join(f"({src}, {dst})" for src, dst in params["mapping"])
        return f"""
        out = grid.copy()
        for src, dst in [{pairs}]:
            out[grid == src] = dst
        return out
        """

    def describe(self, params: Params) -> str:
        changes = ", ".join(f"{src} -> {dst}" for src, dst in params["mapping"])
        return f"Colours are recoloured {changes}; other colours stay."

    def informative(self, train_inputs: list[np.ndarray], test_inputs: list[np.ndarray], params: Params) -> bool:
        return _colors_demonstrated(train_inputs, test_inputs, [src for src, _ in params["mapping"]])


@register
class ColorSwap(Family):
    name = "color_swap"
    rule = "swap two colours"
    params_doc = "colors: [a, b], two distinct colours 1-9"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"colors": sorted(palette(rng, 2))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        colors = list(params["colors"]) + palette(rng, side(rng, 0, 2), exclude=params["colors"])
        size = (difficulty.min_side, difficulty.max_side)
        return random_grid(rng, size, colors=colors, density=float(rng.uniform(0.5, 1.0)))

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        a, b = params["colors"]
        return np.where(grid == a, b, np.where(grid == b, a, grid))

    def body(self, params: Params) -> str:
        a, b = params["colors"]
        return f"""
        out = grid.copy()
        out[grid == {a}] = {b}
        out[grid == {b}] = {a}
        return out
        """

    def describe(self, params: Params) -> str:
        a, b = params["colors"]
        return f"Colours {a} and {b} are swapped."

    def rival_params(self) -> list[Params]:
        return [{"colors": [a, b]} for a in range(10) for b in range(a + 1, 10)]

    def informative(self, train_inputs: list[np.ndarray], test_inputs: list[np.ndarray], params: Params) -> bool:
        return _colors_demonstrated(train_inputs, test_inputs, params["colors"])


def _extreme_color(grid: np.ndarray, pick: str) -> int | None:
    """The most (or least) frequent colour present in `grid`, or None when it is not unique."""
    counts = np.bincount(grid.ravel(), minlength=10)
    present = counts[counts > 0]
    if len(present) < 2:
        return None
    target = present.max() if pick == "most" else present.min()
    winners = np.flatnonzero(counts == target)
    return int(winners[0]) if len(winners) == 1 else None


@register
class MostFrequentColor(Family):
    name = "most_frequent_color"
    rule = "output an s x s grid filled with the most (or least) frequent colour of the input"
    params_doc = "pick: most or least; size: s in 1-3"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"pick": str(rng.choice(["most", "least"])), "size": int(rng.integers(1, 4))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        colors = (
            palette(rng, side(rng, 2, 4), exclude=()) if rng.random() < 0.5 else [0] + palette(rng, side(rng, 1, 3))
        )
        shape = (
            side(rng, difficulty.min_side, difficulty.max_side),
            side(rng, difficulty.min_side, difficulty.max_side),
        )
        weights = rng.dirichlet(np.ones(len(colors)))
        return rng.choice(np.asarray(colors), size=shape, p=weights).astype(int)

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        color = _extreme_color(grid, params["pick"])
        if color is None:
            raise ValueError(f"the {params['pick']} frequent colour is not unique")
        return np.full((params["size"], params["size"]), color)

    def body(self, params: Params) -> str:
        index = "argmax" if params["pick"] == "most" else "argmin"
        size = params["size"]
        return f"""
        colors, counts = np.unique(grid, return_counts=True)
        return np.full(({size}, {size}), colors[counts.{index}()])
        """

    def describe(self, params: Params) -> str:
        size = params["size"]
        return f"The output is a {size}x{size} grid of the {params['pick']} frequent colour of the input."

    def rival_params(self) -> list[Params]:
        return [{"pick": pick, "size": size} for pick in ("most", "least") for size in (1, 2, 3)]

    def informative(self, train_inputs: list[np.ndarray], test_inputs: list[np.ndarray], params: Params) -> bool:
        answers = [_extreme_color(g, params["pick"]) for g in train_inputs + test_inputs]
        # every answer unique, and the answer changes across train pairs (else a constant output explains them)
        return None not in answers and len(set(answers[: len(train_inputs)])) >= 2


@register
class CountBar(Family):
    name = "count_bar"
    rule = "count the cells of colour c; output a 1 x n row (or n x 1 column) of c"
    params_doc = "color: c in 1-9; orientation: row or column"

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        return {"color": int(rng.integers(1, 10)), "orientation": str(rng.choice(["row", "column"]))}

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        colors = [params["color"]] + palette(rng, side(rng, 1, 2), exclude=[params["color"]])
        grid = random_grid(rng, (difficulty.min_side, difficulty.max_side), colors=colors)
        # keep the count of c within 1..max_output_side by recolouring surplus c cells to background
        cells = np.argwhere(grid == params["color"])
        limit = int(rng.integers(1, difficulty.max_output_side + 1))
        if len(cells) > limit:
            drop = cells[rng.choice(len(cells), size=len(cells) - limit, replace=False)]
            grid[drop[:, 0], drop[:, 1]] = 0
        return grid

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        n = int(np.count_nonzero(grid == params["color"]))
        shape = (1, n) if params["orientation"] == "row" else (n, 1)
        return np.full(shape, params["color"])

    def body(self, params: Params) -> str:
        c = params["color"]
        shape = "(1, n)" if params["orientation"] == "row" else "(n, 1)"
        return f"""
        n = int((grid == {c}).sum())
        return np.full({shape}, {c})
        """

    def describe(self, params: Params) -> str:
        c = params["color"]
        return (
            f"The output is a {params['orientation']} of colour {c} with one cell per cell of colour {c} in the input."
        )

    def rival_params(self) -> list[Params]:
        return [{"color": c, "orientation": o} for c in range(1, 10) for o in ("row", "column")]

    def informative(self, train_inputs: list[np.ndarray], test_inputs: list[np.ndarray], params: Params) -> bool:
        counts = {int(np.count_nonzero(g == params["color"])) for g in train_inputs}
        return len(counts) >= 2
