"""Reward modes: pure functions from an `AttemptOutcome` and the task's true grids to a float.

Which grids are evaluated:

- `binary`, `partial`, `balanced`: the test grids (test predictions vs test outputs), in both agent modes.
- `barc`: REPL mode the test grids; program mode the train grids (train predictions vs train outputs) plus the test
  grids when the task has test outputs.

A missing prediction, an invalid grid or a shape mismatch scores 0 pixel accuracy and is not correct. Formulas
(docs/rewards.md has worked examples), with `exact` = fraction of grids predicted exactly and `pixel` = mean pixel
accuracy over the grids:

    binary   = 1 if every test grid is exact else 0                                    range [0, 1]
    partial  = pixel (test grids)                                                      range [0, 1]
    balanced = 0.5 * binary + 0.5 * partial                                           range [0, 1]
    barc     = -1 if no code was parsed, else 0 if some evaluated grid is invalid or missing,
               else 1 + 8 * exact + pixel  (= 1 when nothing is right)                 range [-1, 10]

A missing outcome (None) gets `lowest_reward(mode)`: 0 for binary/partial/balanced, -1 for barc.

`REWARD_MODE_REGISTRY` holds one `RewardMode` per mode: its formula, its floor and top, and whether the program agent
needs the test outputs; `REWARD_MODES` (the names `ArcConfig.reward_mode` takes) is derived from it. A new mode is one
entry.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from arc_trl.config import defaults
from arc_trl.config.choices import AGENT_MODES
from arc_trl.data.task import ArcTask, Grid, is_valid_grid
from arc_trl.rewards.outcome import AttemptOutcome
from arc_trl.rewards.scoring import exact_match, pixel_accuracy

@dataclass(frozen=True)
class GridScores:
    """Scores of a set of predicted grids against their targets."""

    num_grids: int = 0
    num_correct: int = 0
    num_valid: int = 0  # predictions that are valid ARC grids (any shape)
    pixel_sum: float = 0.0  # sum of per-grid pixel accuracies

    @property
    def exact_fraction(self) -> float:
        return self.num_correct / self.num_grids if self.num_grids else 0.0

    @property
    def pixel_score(self) -> float:
        return self.pixel_sum / self.num_grids if self.num_grids else 0.0

    @property
    def valid(self) -> bool:
        """A valid grid for every evaluated input."""
        return self.num_grids > 0 and self.num_valid == self.num_grids

    @property
    def all_correct(self) -> bool:
        return self.num_grids > 0 and self.num_correct == self.num_grids

    def __add__(self, other: GridScores) -> GridScores:
        return GridScores(
            self.num_grids + other.num_grids,
            self.num_correct + other.num_correct,
            self.num_valid + other.num_valid,
            self.pixel_sum + other.pixel_sum,
        )


def score_grids(predictions: Any, targets: list[Grid]) -> GridScores:
    """Score `predictions[i]` against `targets[i]`. Missing entries, None, garbage: invalid, 0 pixels, not correct."""
    if not isinstance(predictions, (list, tuple)):
        predictions = []
    correct = valid = 0
    pixels = 0.0
    for i, target in enumerate(targets):
        pred = predictions[i] if i < len(predictions) else None
        if pred is None or not is_valid_grid(pred):
            continue
        try:
            is_exact, pixel = exact_match(pred, target), pixel_accuracy(pred, target)
        except Exception:  # noqa: BLE001, S112  hostile model output never crashes a reward
            continue
        valid += 1
        correct += int(is_exact)
        pixels += pixel
    return GridScores(len(targets), correct, valid, pixels)


@dataclass(frozen=True)
class RewardBreakdown:
    """Everything the reward modes need, and the per-component values the trainer logs."""

    code_parsed: bool
    test: GridScores | None  # None when the task has no test outputs
    train: GridScores | None  # program mode only

    @property
    def ladder(self) -> GridScores:
        """Grids of the barc ladder: train + test (program mode), test (REPL mode)."""
        return (self.train or GridScores()) + (self.test or GridScores())

    def metrics(self) -> dict[str, float]:
        """Loggable components (test_* need test outputs; train_* exist in program mode only)."""
        out = {"code_parsed": float(self.code_parsed)}
        for name, scores in (("test", self.test), ("train", self.train)):
            if scores is not None:
                out[f"{name}_exact_fraction"] = scores.exact_fraction
                out[f"{name}_pixel_score"] = scores.pixel_score
                out[f"{name}_valid"] = float(scores.valid)
        return out


def evaluate_outcome(outcome: AttemptOutcome, task: ArcTask, agent_mode: str) -> RewardBreakdown:
    """Score an outcome against the task's true grids."""
    check_choice(agent_mode, AGENT_MODES, "agent_mode")
    test = score_grids(outcome.test_predictions, task.test_outputs) if task.test_outputs is not None else None
    train = None
    if agent_mode == "program":
        train = score_grids(outcome.train_predictions, [p.output for p in task.train])
    return RewardBreakdown(bool(outcome.code_parsed), test, train)


def binary_reward(b: RewardBreakdown) -> float:
    """1.0 if every test grid is predicted exactly, else 0.0."""
    return 1.0 if _test(b, "binary").all_correct else 0.0


def partial_reward(b: RewardBreakdown) -> float:
    """Mean pixel accuracy over the test grids (missing / invalid / wrong shape = 0)."""
    return _test(b, "partial").pixel_score


def balanced_reward(b: RewardBreakdown) -> float:
    """0.5 * binary + 0.5 * partial."""
    return 0.5 * binary_reward(b) + 0.5 * partial_reward(b)


def barc_reward(b: RewardBreakdown) -> float:
    """BARC code ladder: -1 no code parsed; 0 some evaluated grid invalid/missing; else 1 + 8 * exact + pixel.

    Evaluated grids: `RewardBreakdown.ladder`. Range [-1, 10]; 1 when the outputs are valid but nothing is right.
    """
    if not b.code_parsed:
        return -1.0
    scores = b.ladder
    if scores.num_grids == 0:
        raise ValueError("reward mode 'barc' in REPL mode needs the test outputs, but the task has none")
    if not scores.valid:
        return 0.0
    return 1.0 + 8.0 * scores.exact_fraction + scores.pixel_score


@dataclass(frozen=True)
class RewardMode:
    """One reward mode: its formula and what the rest of the package reads about it."""

    reward: Callable[[RewardBreakdown], float]
    lowest: float  # the reward of a missing outcome (and the mode's floor)
    highest: float  # the top reward, reached only when every evaluated grid is exact
    program_needs_test_outputs: bool = True  # False: the program agent's train grids suffice (barc's ladder)


REWARD_MODE_REGISTRY: dict[str, RewardMode] = {
    "binary": RewardMode(binary_reward, lowest=0.0, highest=1.0),
    "partial": RewardMode(partial_reward, lowest=0.0, highest=1.0),
    "balanced": RewardMode(balanced_reward, lowest=0.0, highest=1.0),
    "barc": RewardMode(barc_reward, lowest=-1.0, highest=10.0, program_needs_test_outputs=False),
}
REWARD_MODES: tuple[str, ...] = tuple(REWARD_MODE_REGISTRY)


def lowest_reward(mode: str) -> float:
    """The reward of a missing outcome: 0 for binary/partial/balanced, -1 for barc."""
    check_choice(mode, REWARD_MODES, "reward mode")
    return REWARD_MODE_REGISTRY[mode].lowest


def highest_reward(mode: str) -> float:
    """The top reward of `mode`, reached only when every evaluated grid is exact: 1, or 10 for barc."""
    check_choice(mode, REWARD_MODES, "reward mode")
    return REWARD_MODE_REGISTRY[mode].highest


def needs_test_outputs(mode: str, agent_mode: str) -> bool:
    """Every mode needs the test outputs, except barc in program mode (the train pairs suffice)."""
    check_choice(mode, REWARD_MODES, "reward mode")
    return agent_mode != "program" or REWARD_MODE_REGISTRY[mode].program_needs_test_outputs


def compute_reward(
    mode: str, outcome: AttemptOutcome | dict | None, task: ArcTask, agent_mode: str = defaults.AGENT_MODE
) -> float:
    """Reward of one attempt. `outcome` may be an `AttemptOutcome`, its dict, or None (-> `lowest_reward(mode)`)."""
    check_choice(mode, REWARD_MODES, "reward mode")
    check_choice(agent_mode, AGENT_MODES, "agent_mode")
    if task.test_outputs is None and needs_test_outputs(mode, agent_mode):
        raise ValueError(f"reward mode {mode!r} ({agent_mode} mode) needs test outputs, but task {task.id!r} has none")
    outcome = as_outcome(outcome)
    if outcome is None:
        return REWARD_MODE_REGISTRY[mode].lowest
    return REWARD_MODE_REGISTRY[mode].reward(evaluate_outcome(outcome, task, agent_mode))


def as_outcome(outcome: Any) -> AttemptOutcome | None:
    """An `AttemptOutcome` from an outcome or its dict; None for None or anything unusable."""
    if isinstance(outcome, AttemptOutcome):
        return outcome
    if isinstance(outcome, dict):
        try:
            return AttemptOutcome.from_dict(outcome)
        except Exception:  # noqa: BLE001  a malformed outcome counts as missing
            return None
    return None


def _test(b: RewardBreakdown, mode: str) -> GridScores:
    if b.test is None:
        raise ValueError(f"reward mode {mode!r} needs the test outputs, but the task has none")
    return b.test


def check_choice(value: str, allowed: Collection[str], label: str) -> None:
    if value not in allowed:
        raise ValueError(f"{label} must be one of {list(allowed)}, got {value!r}")
