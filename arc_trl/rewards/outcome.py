"""What one attempt at a task produced, as reported by the sandbox; the input of every reward and metric.

An `AttemptOutcome` travels from the rollout (which executes code) to the reward functions (which are pure) as a plain
dict through TRL's `rollout_func` extra fields, so it must stay JSON-serialisable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from arc_trl.data.task import Grid


@dataclass
class AttemptOutcome:
    code_found: bool = False  # the completion contains at least one python code block (or a program)
    code_parsed: bool = False  # at least one of those blocks compiled
    # One entry per test input: the predicted grid, or None where no valid grid was produced. None when the attempt
    # never produced test predictions at all (no SUBMIT and no usable transform).
    test_predictions: list[Grid | None] | None = None
    # Program mode: the transform's output for each train input (None entries where it failed).
    train_predictions: list[Grid | None] | None = None
    submitted: bool = False  # REPL: a well-formed SUBMIT(...) ended the episode
    error_kind: str | None = None  # last sandbox problem: 'timeout', 'memory', 'crash', 'exception', 'refused', ...
    num_turns: int = 0
    num_code_runs: int = 0
    num_errors: int = 0
    num_timeouts: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AttemptOutcome:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)
