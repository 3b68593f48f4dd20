"""The interface of a transformation family, and the registry of all families.

A family is a parametrised rule (e.g. "rotate by k quarter turns"). For one task, `sample_params` draws the task's
parameters; `sample_input` draws random input grids suited to them; `apply` computes an output; `program` returns the
task's reference program: Python source defining `def transform(grid)` with the parameters written as literals,
which must compute exactly what `apply` computes (the generator checks this on every pair it produces).

Parameters are JSON values (dicts of ints, strings and lists) so they round-trip through task metadata files.
"""

from __future__ import annotations

import textwrap
from typing import Any, ClassVar

import numpy as np

from arc_trl.synthetic.difficulty import Difficulty

Params = dict[str, Any]

PROGRAM_HEADER = "import numpy as np\n\n\ndef transform(grid):\n"


class Family:
    """Base class of the transformation families. Subclasses set `name`, `rule`, `params_doc` and the methods."""

    name: ClassVar[str]
    rule: ClassVar[str]  # one line, for the docs
    params_doc: ClassVar[str]  # the parameters and their ranges, for the docs

    def sample_params(self, rng: np.random.Generator, difficulty: Difficulty) -> Params:
        raise NotImplementedError

    def sample_input(self, rng: np.random.Generator, params: Params, difficulty: Difficulty) -> np.ndarray:
        """A random input grid; its sides stay within the difficulty's bounds and its output must fit."""
        raise NotImplementedError

    def apply(self, grid: np.ndarray, params: Params) -> np.ndarray:
        raise NotImplementedError

    def body(self, params: Params) -> str:
        """The body of `transform(grid)` (unindented source) for these parameters."""
        raise NotImplementedError

    def describe(self, params: Params) -> str:
        """One sentence stating the rule with these parameters, e.g. "The grid is rotated 180 degrees."."""
        raise NotImplementedError

    def rival_params(self) -> list[Params]:
        """Parameter values tried as alternative explanations when checking that a task is unambiguous."""
        return []

    def informative(self, train_inputs: list[np.ndarray], test_inputs: list[np.ndarray], params: Params) -> bool:
        """False when the train pairs do not demonstrate everything the test inputs need (family-specific)."""
        return True

    def program(self, params: Params) -> str:
        """The reference program: imports numpy and defines `transform(grid)`."""
        return PROGRAM_HEADER + textwrap.indent(textwrap.dedent(self.body(params)).strip("\n"), "    ") + "\n"


FAMILIES: dict[str, Family] = {}


def register(cls: type[Family]) -> type[Family]:
    """Class decorator: add one instance of the family to `FAMILIES`."""
    if cls.name in FAMILIES:
        raise ValueError(f"family {cls.name!r} is registered twice")
    FAMILIES[cls.name] = cls()
    return cls


def family_names() -> list[str]:
    """Names of all registered families, in registration order."""
    return list(FAMILIES)


def get_family(name: str | Family) -> Family:
    if isinstance(name, Family):
        return name
    if name not in FAMILIES:
        raise ValueError(f"unknown synthetic task family {name!r}; known families: {', '.join(FAMILIES)}")
    return FAMILIES[name]
