"""Difficulty levels of synthetic tasks: grid sizes and the number of examples.

`min_side..max_side` bounds each side of the input grids; `max_output_side` bounds each side of the outputs (families
that enlarge grids, like tile or upscale, shrink their inputs to fit). `tiny` keeps a whole prompt to a few hundred
characters, for CPU demonstrations with a tiny model.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_trl.data.task import MAX_SIDE


@dataclass(frozen=True)
class Difficulty:
    name: str
    min_side: int
    max_side: int
    max_output_side: int
    min_train: int
    max_train: int
    min_test: int
    max_test: int

    def __post_init__(self) -> None:
        if not 1 <= self.min_side <= self.max_side <= MAX_SIDE:
            raise ValueError(f"difficulty {self.name!r}: need 1 <= min_side <= max_side <= {MAX_SIDE}")
        if not self.max_side <= self.max_output_side <= MAX_SIDE:
            raise ValueError(f"difficulty {self.name!r}: need max_side <= max_output_side <= {MAX_SIDE}")
        if not 1 <= self.min_train <= self.max_train or not 1 <= self.min_test <= self.max_test:
            raise ValueError(
                f"difficulty {self.name!r}: need 1 <= min_train <= max_train and 1 <= min_test <= max_test"
            )


DIFFICULTIES: dict[str, Difficulty] = {
    d.name: d
    for d in (
        Difficulty("tiny", 2, 5, 10, 2, 3, 1, 1),
        Difficulty("small", 3, 10, 20, 2, 4, 1, 2),
        Difficulty("medium", 3, 20, 30, 2, 4, 1, 2),
        Difficulty("full", 3, 30, 30, 2, 4, 1, 2),
    )
}


def get_difficulty(difficulty: str | Difficulty) -> Difficulty:
    """A `Difficulty` from its name (tiny, small, medium, full) or itself."""
    if isinstance(difficulty, Difficulty):
        return difficulty
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"unknown difficulty {difficulty!r}; choose one of: {', '.join(DIFFICULTIES)}")
    return DIFFICULTIES[difficulty]
