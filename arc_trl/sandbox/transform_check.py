"""`check_transform`: what the REPL tells the model after its message defined `transform(grid)` (and what it submits).

The message's `transform` has been applied to every train and test input (`Session.apply_transform`). The reply
lists, per training example, whether the output matches, and why not (an error, a wrong shape, how many cells
differ). When every training output matches and every test input gave a grid, those test grids are submitted, as if
the model had called `SUBMIT([transform(x) for x in test_inputs])`.
"""

from __future__ import annotations

from arc_trl.data.task import Grid
from arc_trl.sandbox.results import ProgramResult

MAX_ERROR_CHARS = 200  # of one call's error in the reply


def _shape(grid: Grid) -> str:
    return f"{len(grid)}x{len(grid[0]) if grid else 0}"


def _pair_verdict(output: Grid | None, error: str | None, expected: Grid) -> tuple[bool, str]:
    if output is None:
        detail = (error or "no grid returned").strip().replace("\n", " ")
        return False, f"error: {detail[:MAX_ERROR_CHARS]}"
    if _shape(output) != _shape(expected):
        return False, f"wrong shape: {_shape(output)}, expected {_shape(expected)}"
    wrong = sum(a != b for row, want in zip(output, expected) for a, b in zip(row, want))
    if wrong:
        return False, f"wrong: {wrong} of {len(expected) * len(expected[0])} cells differ"
    return True, "matches"


def transform_verdict(program: ProgramResult, train_outputs: list[Grid]) -> tuple[list[Grid] | None, str]:
    """(the test grids to submit, or None; the text for the model) of a `transform` applied to every input."""
    verdicts = [_pair_verdict(out, err, want)
                for out, err, want in zip(program.train_outputs, program.train_errors, train_outputs, strict=True)]
    matched = sum(ok for ok, _ in verdicts)
    lines = [f"transform(grid) checked on the {len(verdicts)} training examples: {matched} of {len(verdicts)} "
             "outputs match."]
    lines += [f"- example {i + 1}: {text}" for i, (_, text) in enumerate(verdicts)]
    if not verdicts:
        return None, "transform(grid) was not checked: the task has no training examples; call SUBMIT yourself."
    if matched < len(verdicts):
        lines.append("Fix transform and send it again, or explore the examples with code.")
        return None, "\n".join(lines)
    failed = [i for i, out in enumerate(program.test_outputs) if out is None]
    if failed:
        error = (program.test_errors[failed[0]] or "no grid returned").strip().replace("\n", " ")
        lines.append(f"But transform gave no grid for test input {failed[0] + 1} ({error[:MAX_ERROR_CHARS]}): "
                     "nothing was submitted.")
        return None, "\n".join(lines)
    lines.append("Every training output matches: transform's outputs for the test inputs are submitted.")
    return list(program.test_outputs), "\n".join(lines)
