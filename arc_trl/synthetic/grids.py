"""Random grid helpers shared by the task families. All randomness comes from a `numpy.random.Generator`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

COLORS = tuple(range(1, 10))  # non-background colours


def side(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A random side length in lo..hi (lo is lowered to hi when hi < lo)."""
    lo = min(lo, hi)
    return int(rng.integers(lo, hi + 1))


def palette(rng: np.random.Generator, n: int, exclude: Sequence[int] = ()) -> list[int]:
    """`n` distinct random colours from 1..9, none of them in `exclude`."""
    choices = [c for c in COLORS if c not in exclude]
    return [int(c) for c in rng.choice(choices, size=min(n, len(choices)), replace=False)]


def noise(
    rng: np.random.Generator, shape: tuple[int, int], colors: Sequence[int], density: float, background: int = 0
) -> np.ndarray:
    """A grid of `background` where each cell independently gets a random colour of `colors` with prob. `density`."""
    grid = np.full(shape, background, dtype=int)
    mask = rng.random(shape) < density
    grid[mask] = rng.choice(np.asarray(colors, dtype=int), size=int(mask.sum()))
    return grid


def random_grid(
    rng: np.random.Generator,
    rows: tuple[int, int],
    cols: tuple[int, int] | None = None,
    colors: Sequence[int] | None = None,
    density: float | None = None,
) -> np.ndarray:
    """A random grid with rows[0]..rows[1] rows and cols[0]..cols[1] columns (default: like rows).

    Default contents: 1-4 random colours scattered on background 0 (density 0.3-0.7 for one colour, else 0.4-1).
    """
    shape = (side(rng, *rows), side(rng, *(cols or rows)))
    if colors is None:
        colors = palette(rng, side(rng, 1, 4))
    if density is None:
        density = float(rng.uniform(0.3, 0.7) if len(colors) == 1 else rng.uniform(0.4, 1.0))
    return noise(rng, shape, colors, density)
