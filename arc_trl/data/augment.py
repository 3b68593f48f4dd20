"""Task augmentation: the 8 symmetries of the square (dihedral group D4) and colour permutations.

An `Augmentation` is a dihedral index plus a colour permutation, applied identically to every grid of a task.
Geometry and colours commute, so the order in which they are applied does not matter. Dihedral indices:

    0 identity   1 rot90 (counter-clockwise, like np.rot90)   2 rot180   3 rot270
    4 flip_h (mirror left-right)   5 flip_v (mirror top-bottom)   6 transpose   7 anti_transpose

`colors[c]` is the new colour of colour `c`. By default colour 0 (the usual background) stays fixed.

Augmented tasks get a new id `"<original id>|<augmentation string>"` (e.g. `"007bbfb7|d3c0412356789"`) so several
augmentations of one task can live in one dataset; `metadata["original_id"]` and `metadata["augmentation"]` record
how to map predictions back (`Augmentation.from_string(...).invert(predictions)`). The string form is
`d<k>` followed by `c<10 digits>` when the colours are permuted; the identity is the empty string.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from arc_trl.data.task import ArcTask, Grid, Pair, normalize_grid

IDENTITY_COLORS: tuple[int, ...] = tuple(range(10))
ID_SEPARATOR = "|"


def _identity(g: Grid) -> Grid:
    return [list(row) for row in g]


def _rot90(g: Grid) -> Grid:
    return [list(row) for row in zip(*g)][::-1]


def _rot180(g: Grid) -> Grid:
    return [list(row[::-1]) for row in g[::-1]]


def _rot270(g: Grid) -> Grid:
    return [list(row) for row in zip(*g[::-1])]


def _flip_h(g: Grid) -> Grid:
    return [list(row[::-1]) for row in g]


def _flip_v(g: Grid) -> Grid:
    return [list(row) for row in g[::-1]]


def _transpose(g: Grid) -> Grid:
    return [list(row) for row in zip(*g)]


def _anti_transpose(g: Grid) -> Grid:
    return _rot180(_transpose(g))


DIHEDRAL_NAMES = ("identity", "rot90", "rot180", "rot270", "flip_h", "flip_v", "transpose", "anti_transpose")
_DIHEDRAL_FUNCS: tuple[Callable[[Grid], Grid], ...] = (
    _identity,
    _rot90,
    _rot180,
    _rot270,
    _flip_h,
    _flip_v,
    _transpose,
    _anti_transpose,
)
DIHEDRAL_INVERSE = (0, 3, 2, 1, 4, 5, 6, 7)


def dihedral(grid: Grid, k: int) -> Grid:
    """Apply dihedral transform `k` (0..7, see module docstring) to a grid."""
    return _DIHEDRAL_FUNCS[k](grid)


def _compose_table() -> tuple[tuple[int, ...], ...]:
    """table[a][b] = the single transform equal to applying a, then b (found on a grid all 8 map differently)."""
    probe = [[0, 1, 2], [3, 4, 5]]
    images = [dihedral(probe, k) for k in range(8)]
    return tuple(tuple(images.index(dihedral(dihedral(probe, a), b)) for b in range(8)) for a in range(8))


_COMPOSE = _compose_table()


def compose_dihedral(first: int, second: int) -> int:
    """Index of the transform equal to applying `first`, then `second`."""
    return _COMPOSE[first][second]


_STRING_RE = re.compile(r"^d([0-7])(?:c([0-9]{10}))?$")


@dataclass(frozen=True)
class Augmentation:
    """A dihedral transform (index 0..7) plus a colour permutation (`colors[old] = new`)."""

    dihedral: int = 0
    colors: tuple[int, ...] = IDENTITY_COLORS

    def __post_init__(self) -> None:
        if isinstance(self.dihedral, bool) or not isinstance(self.dihedral, int) or not 0 <= self.dihedral < 8:
            raise ValueError(f"dihedral index must be an int in 0..7, got {self.dihedral!r}")
        colors = tuple(self.colors)
        if sorted(colors) != list(IDENTITY_COLORS) or not all(type(c) is int for c in colors):
            raise ValueError(f"colors must be a permutation of 0..9, got {self.colors!r}")
        object.__setattr__(self, "colors", colors)

    @property
    def is_identity(self) -> bool:
        return self.dihedral == 0 and self.colors == IDENTITY_COLORS

    # --- grids ---

    def apply_grid(self, grid: Any) -> Grid:
        """Transform one grid (list of lists or numpy array)."""
        grid = normalize_grid(grid)
        colors = self.colors
        return [[colors[v] for v in row] for row in dihedral(grid, self.dihedral)]

    def invert_grid(self, grid: Any) -> Grid:
        """Undo `apply_grid`."""
        return self.inverse().apply_grid(grid)

    def invert(self, predictions: Sequence[Any] | None) -> list[Grid | None] | None:
        """Map predictions made on the augmented task back to the original task; invalid entries become None."""
        if predictions is None:
            return None
        inverse = self.inverse()
        out: list[Grid | None] = []
        for grid in predictions:
            try:
                out.append(inverse.apply_grid(grid))
            except Exception:  # noqa: BLE001  model output: anything that is not a valid grid maps to None
                out.append(None)
        return out

    # --- group structure ---

    def inverse(self) -> Augmentation:
        inverse_colors = [0] * 10
        for old, new in enumerate(self.colors):
            inverse_colors[new] = old
        return Augmentation(DIHEDRAL_INVERSE[self.dihedral], tuple(inverse_colors))

    def then(self, other: Augmentation) -> Augmentation:
        """The augmentation equal to applying `self`, then `other`."""
        return Augmentation(
            compose_dihedral(self.dihedral, other.dihedral), tuple(other.colors[c] for c in self.colors)
        )

    # --- tasks ---

    def apply_task(self, task: ArcTask) -> ArcTask:
        """The augmented task. The id becomes `"<original id>|<augmentation>"`; metadata records both.

        Augmenting an already augmented task composes the augmentations (the id keeps one suffix). The metadata keys
        `reference_program`, `params`, `rule` and `family` are dropped: they describe the original grids only.
        """
        original_id = task.metadata.get("original_id", task.id)
        previous = Augmentation.from_string(task.metadata.get("augmentation", ""))
        total = previous.then(self)
        metadata = {k: v for k, v in task.metadata.items() if k not in ("original_id", "augmentation")}
        if total.is_identity:
            task_id = original_id
        else:
            for stale in ("reference_program", "params", "rule", "family"):  # describe the original grids only
                metadata.pop(stale, None)
            metadata.update(original_id=original_id, augmentation=total.to_string())
            task_id = f"{original_id}{ID_SEPARATOR}{total.to_string()}"
        return ArcTask(
            id=task_id,
            train=[Pair(self.apply_grid(p.input), self.apply_grid(p.output)) for p in task.train],
            test_inputs=[self.apply_grid(g) for g in task.test_inputs],
            test_outputs=[self.apply_grid(g) for g in task.test_outputs] if task.test_outputs is not None else None,
            source=task.source,
            metadata=metadata,
        )

    # --- serialisation ---

    def to_string(self) -> str:
        """Short form: '' (identity), 'd3' (geometry only) or 'd3c0412356789' (with colours)."""
        if self.is_identity:
            return ""
        colors = "" if self.colors == IDENTITY_COLORS else "c" + "".join(map(str, self.colors))
        return f"d{self.dihedral}{colors}"

    @classmethod
    def from_string(cls, text: str) -> Augmentation:
        if not text:
            return cls()
        match = _STRING_RE.match(text)
        if not match:
            raise ValueError(
                f"bad augmentation string {text!r}; expected 'd<0-7>' optionally followed by 'c<10 digits>'"
            )
        colors = tuple(int(c) for c in match.group(2)) if match.group(2) else IDENTITY_COLORS
        return cls(int(match.group(1)), colors)

    def __str__(self) -> str:
        return self.to_string()


def split_task_id(task_id: str) -> tuple[str, Augmentation]:
    """Split an augmented task id into (original id, augmentation); plain ids give the identity."""
    original, sep, suffix = task_id.rpartition(ID_SEPARATOR)
    if not sep:
        return task_id, Augmentation()
    return original, Augmentation.from_string(suffix)


def random_augmentation(
    rng: random.Random | int | None = None,
    *,
    geometric: bool = True,
    colors: bool = True,
    permute_background: bool = False,
) -> Augmentation:
    """Draw a uniformly random dihedral transform and/or colour permutation.

    `permute_background=False` keeps colour 0 fixed and shuffles 1..9; True shuffles all 10 colours.
    """
    if not isinstance(rng, random.Random):
        rng = random.Random(rng)
    k = rng.randrange(8) if geometric else 0
    perm = list(IDENTITY_COLORS)
    if colors:
        if permute_background:
            rng.shuffle(perm)
        else:
            rest = perm[1:]
            rng.shuffle(rest)
            perm = [0] + rest
    return Augmentation(k, tuple(perm))
