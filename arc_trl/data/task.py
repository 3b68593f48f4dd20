"""The one ARC task model used everywhere: loaders produce it, prompts render it, the sandbox and rewards consume it.

A grid is a rectangular list of rows of integer colours 0..9, 1..30 cells per side. A task has at least one train
pair (input and output) and at least one test input; test outputs are optional (absent for hidden test sets).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Grid = list[list[int]]

MAX_SIDE = 30
NUM_COLORS = 10


class TaskValidationError(ValueError):
    """A task (or one of its grids) is malformed. The message names the file, task id, pair and problem."""


def grid_problem(grid: Any) -> str | None:
    """Return a description of what is wrong with `grid`, or None when it is a valid ARC grid."""
    if hasattr(grid, "tolist"):  # numpy arrays
        grid = grid.tolist()
    if not isinstance(grid, list) or not grid:
        return "grid must be a non-empty list of rows"
    if len(grid) > MAX_SIDE:
        return f"grid has {len(grid)} rows (max {MAX_SIDE})"
    width = None
    for r, row in enumerate(grid):
        if not isinstance(row, list) or not row:
            return f"row {r} must be a non-empty list"
        if width is None:
            width = len(row)
            if width > MAX_SIDE:
                return f"grid has {width} columns (max {MAX_SIDE})"
        elif len(row) != width:
            return f"grid is not rectangular (row 0 has {width} cells, row {r} has {len(row)})"
        for c, value in enumerate(row):
            # bool is an int subclass; reject it explicitly.
            if isinstance(value, bool) or not isinstance(value, int):
                return f"cell ({r},{c}) is {value!r}, not an integer colour"
            if not 0 <= value < NUM_COLORS:
                return f"cell ({r},{c}) has colour {value} outside 0..9"
    return None


def is_valid_grid(grid: Any) -> bool:
    """True when `grid` (list of lists or numpy array) is a valid ARC grid."""
    try:
        return grid_problem(grid) is None
    except Exception:  # hostile objects (e.g. from model output) must never crash validation
        return False


def normalize_grid(grid: Any) -> Grid:
    """Convert a numpy array / nested sequence of ints to a plain `Grid`. Raises ValueError when not a valid grid."""
    plain = _copy_if_plain(grid)
    if plain is not None:
        return plain
    if hasattr(grid, "tolist"):
        grid = grid.tolist()
    if isinstance(grid, tuple):
        grid = list(grid)
    if isinstance(grid, list):
        grid = [list(row) if isinstance(row, (list, tuple)) else row for row in grid]
        grid = [[int(v) if _is_integral(v) else v for v in row] if isinstance(row, list) else row for row in grid]
    problem = grid_problem(grid)
    if problem:
        raise ValueError(problem)
    return grid


def _copy_if_plain(grid: Any) -> Grid | None:
    """A copy of `grid` when it already is a valid plain grid (lists of Python ints 0..9), else None. The fast path of
    `normalize_grid`: each row is checked by C loops (types, min, max), not cell by cell in Python."""
    if type(grid) is not list or not 0 < len(grid) <= MAX_SIDE or type(grid[0]) is not list:
        return None
    width = len(grid[0])
    if not 0 < width <= MAX_SIDE:
        return None
    for row in grid:
        if type(row) is not list or len(row) != width or set(map(type, row)) != _INT_ONLY or min(row) < 0 \
                or max(row) >= NUM_COLORS:
            return None
    return [row[:] for row in grid]


_INT_ONLY = {int}


def _is_integral(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    # numpy integer scalars expose `is_integer`-less __index__; floats like 3.0 are not accepted as colours
    return hasattr(value, "__index__") and not isinstance(value, float)


@dataclass(frozen=True)
class Pair:
    """One example: an input grid and (for train pairs, or solved test pairs) its output grid."""

    input: Grid
    output: Grid | None = None


@dataclass
class ArcTask:
    """An ARC task. `test_outputs` is None when the solutions are unknown."""

    id: str
    train: list[Pair]
    test_inputs: list[Grid]
    test_outputs: list[Grid] | None = None
    source: str | None = None  # file the task was read from (for error messages and provenance)
    metadata: dict[str, Any] = field(default_factory=dict)  # e.g. {"reference_program": "..."} for synthetic tasks

    @property
    def has_solutions(self) -> bool:
        return self.test_outputs is not None

    @property
    def all_grids(self) -> list[Grid]:
        grids = [g for p in self.train for g in (p.input, p.output) if g is not None] + list(self.test_inputs)
        return grids + list(self.test_outputs or [])

    def without_solutions(self) -> ArcTask:
        """The task as a solver may see it: no test outputs, no metadata (which may hold a reference program)."""
        return ArcTask(self.id, list(self.train), list(self.test_inputs), None, self.source, {})

    def to_json(self, include_solutions: bool = True) -> dict[str, Any]:
        """The standard per-task ARC JSON: {"train": [{"input", "output"}], "test": [{"input"[, "output"]}]}."""
        test = []
        for i, grid in enumerate(self.test_inputs):
            item: dict[str, Any] = {"input": grid}
            if include_solutions and self.test_outputs is not None:
                item["output"] = self.test_outputs[i]
            test.append(item)
        return {"train": [{"input": p.input, "output": p.output} for p in self.train], "test": test}

    @classmethod
    def from_json(
        cls,
        task_id: str,
        obj: Any,
        source: str | None = None,
        solutions: list[Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ArcTask:
        """Build and validate a task from ARC JSON. `solutions` (Kaggle style) override outputs inside `test`."""
        where = f"{source or '<memory>'}: task {task_id!r}"

        def fail(msg: str) -> TaskValidationError:
            return TaskValidationError(f"{where}: {msg}")

        if not isinstance(obj, dict):
            raise fail(f"expected an object with 'train' and 'test', got {type(obj).__name__}")
        for key in ("train", "test"):
            if key not in obj:
                raise fail(f"missing '{key}'")
            if not isinstance(obj[key], list):
                raise fail(f"'{key}' must be a list")
        if not obj["train"]:
            raise fail("needs at least one train pair")
        if not obj["test"]:
            raise fail("needs at least one test input")

        def check(grid: Any, label: str) -> Grid:
            problem = grid_problem(grid)
            if problem:
                raise fail(f"{label}: {problem}")
            return grid

        train = []
        for i, pair in enumerate(obj["train"]):
            if not isinstance(pair, dict) or "input" not in pair or "output" not in pair:
                raise fail(f"train pair {i}: needs 'input' and 'output'")
            inp = check(pair["input"], f"train pair {i} input")
            train.append(Pair(inp, check(pair["output"], f"train pair {i} output")))

        test_inputs, test_outputs = [], []
        for i, pair in enumerate(obj["test"]):
            if not isinstance(pair, dict) or "input" not in pair:
                raise fail(f"test pair {i}: needs 'input'")
            test_inputs.append(check(pair["input"], f"test pair {i} input"))
            if "output" in pair and pair["output"] is not None:
                test_outputs.append(check(pair["output"], f"test pair {i} output"))

        if solutions is not None:
            if not isinstance(solutions, list) or len(solutions) != len(test_inputs):
                n = len(solutions) if isinstance(solutions, list) else type(solutions).__name__
                raise fail(f"solutions: expected {len(test_inputs)} grids, got {n}")
            test_outputs = [check(g, f"solution {i}") for i, g in enumerate(solutions)]
        if test_outputs and len(test_outputs) != len(test_inputs):
            raise fail(f"{len(test_outputs)} test outputs for {len(test_inputs)} test inputs")

        return cls(task_id, train, test_inputs, test_outputs or None, source, dict(metadata or {}))
