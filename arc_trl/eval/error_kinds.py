"""One word per attempt for what it came to: solved, wrong, or why it submitted nothing.

`attempt_kind` is what the evaluation summary counts (`arc_trl.eval.summary`) and what `arc-trl view` shows per
attempt. An attempt with a valid grid for every test input is `solved` or `wrong` (`submitted` when the solutions are
unknown), whatever errors it met on the way. One without names the first reason that applies:

- `truncated`: cut by a token limit (the per-turn cap or the episode budget) before it could submit;
- `no code`: no Python code block in its messages;
- `syntax`: its last failing code did not compile (SyntaxError, IndentationError, TabError);
- `timeout`: its last failing code hit the CPU or wall-clock limit;
- `runtime`: its last failing code raised, ran out of memory, crashed or was refused by the sandbox;
- `no submit`: its code ran without error but it never submitted valid grids.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

KINDS = ("solved", "wrong", "submitted", "truncated", "no code", "syntax", "timeout", "runtime", "no submit")
FAILURE_KINDS = ("truncated", "no code", "syntax", "timeout", "runtime", "no submit")
TRUNCATED_ENDINGS = frozenset({"truncated", "budget"})  # arc_trl.rollout.episode.TRUNCATED_ENDINGS
SYNTAX_ERRORS = frozenset({"syntax", "SyntaxError", "IndentationError", "TabError"})  # replay: "syntax"
TIMEOUT_ERRORS = frozenset({"timeout", "wall_time", "cpu_time", "hard_timeout"})


def attempt_kind(passed: bool | None, valid_outputs: bool, finish_reason: str | None, code_found: bool,
                 error_kind: str | None) -> str:
    """The kind (module docstring) of an attempt from its verdict and what the sandbox reported."""
    if valid_outputs:
        return "submitted" if passed is None else ("solved" if passed else "wrong")
    if finish_reason in TRUNCATED_ENDINGS:
        return "truncated"
    if not code_found:
        return "no code"
    if error_kind in SYNTAX_ERRORS:
        return "syntax"
    if error_kind in TIMEOUT_ERRORS:
        return "timeout"
    if error_kind:
        return "runtime"
    return "no submit"


def kind_counts(kinds: Iterable[str]) -> dict[str, int]:
    """{kind: attempts}, in `KINDS` order, kinds that never occur left out."""
    counts = Counter(kinds)
    return {kind: counts[kind] for kind in KINDS if counts[kind]}
