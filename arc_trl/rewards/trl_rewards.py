"""Reward functions in the form `GRPOTrainer(reward_funcs=[...])` expects.

TRL (1.16, `GRPOTrainer._calculate_rewards`) calls each function as
`f(prompts=..., completions=..., completion_ids=..., **kwargs)` where kwargs holds every dataset column as a list
(`task_json`, `task_id`, `augmentation`, ...), every extra field returned by the rollout function (ours returns
`outcome`: one `AttemptOutcome.to_dict()` per completion) and `trainer_state`, `log_extra`, `log_metric`. It expects
one float (or None = not applicable) per completion, and names the logged column after `__name__`.

A missing or None outcome gets the lowest reward of the mode (`lowest_reward`); hostile predictions never raise.
Configuration errors (no `task_json` column, a reward mode that needs test outputs on a task without them) do raise.
The callables are instances of module-level classes, so they pickle.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from arc_trl.config import defaults
from arc_trl.config.choices import AGENT_MODES
from arc_trl.data.task import ArcTask
from arc_trl.rewards.modes import (
    REWARD_MODES,
    RewardBreakdown,
    as_outcome,
    check_choice,
    compute_reward,
    evaluate_outcome,
)
from arc_trl.rewards.outcome import AttemptOutcome

logger = logging.getLogger(__name__)

# component name -> (key of RewardBreakdown.metrics(), value when the outcome is missing)
COMPONENTS: dict[str, tuple[str, float]] = {
    "exact_match_fraction": ("test_exact_fraction", 0.0),
    "pixel_score": ("test_pixel_score", 0.0),
    "valid_outputs": ("test_valid", 0.0),
    "code_parsed": ("code_parsed", 0.0),
    "train_exact_match_fraction": ("train_exact_fraction", 0.0),
    "train_pixel_score": ("train_pixel_score", 0.0),
}
_PROGRAM_ONLY = ("train_exact_match_fraction", "train_pixel_score")


class ArcReward:
    """The reward of `mode` (binary, partial, balanced, barc) for `agent_mode` (repl, program); see `modes`."""

    def __init__(self, mode: str, agent_mode: str = defaults.AGENT_MODE):
        check_choice(mode, REWARD_MODES, "reward mode")
        check_choice(agent_mode, AGENT_MODES, "agent_mode")
        self.mode, self.agent_mode = mode, agent_mode
        self.__name__ = f"arc_reward_{mode}"

    def __call__(self, prompts=None, completions=None, completion_ids=None, **kwargs: Any) -> list[float]:
        tasks, outcomes = _batch(self.__name__, prompts, completions, kwargs)
        return [compute_reward(self.mode, o, t, self.agent_mode) for t, o in zip(tasks, outcomes)]

    def __repr__(self) -> str:
        return f"ArcReward(mode={self.mode!r}, agent_mode={self.agent_mode!r})"


class ArcRewardComponent:
    """One component of the reward (see `COMPONENTS`), meant to be logged with weight 0.

    Returns None (TRL: not applicable) where the component does not exist: test components on tasks without test
    outputs, train components in REPL mode. A missing outcome scores 0.
    """

    def __init__(self, name: str, agent_mode: str = defaults.AGENT_MODE):
        check_choice(name, tuple(COMPONENTS), "reward component")
        check_choice(agent_mode, AGENT_MODES, "agent_mode")
        self.name, self.agent_mode = name, agent_mode
        self.__name__ = name

    def __call__(self, prompts=None, completions=None, completion_ids=None, **kwargs: Any) -> list[float | None]:
        tasks, outcomes = _batch(self.__name__, prompts, completions, kwargs)
        key, missing_value = COMPONENTS[self.name]
        values: list[float | None] = []
        for task, raw in zip(tasks, outcomes):
            outcome = as_outcome(raw)
            breakdown = evaluate_outcome(outcome or AttemptOutcome(), task, self.agent_mode)
            metrics = breakdown.metrics()
            if key not in metrics:
                values.append(None)
            else:
                values.append(metrics[key] if outcome is not None else missing_value)
        return values

    def __repr__(self) -> str:
        return f"ArcRewardComponent(name={self.name!r}, agent_mode={self.agent_mode!r})"


def make_reward_func(mode: str, agent_mode: str = defaults.AGENT_MODE) -> Callable[..., list[float]]:
    """The TRL reward function of `mode`; its `__name__` is `arc_reward_<mode>`."""
    return ArcReward(mode, agent_mode)


def make_component_reward_funcs(agent_mode: str = defaults.AGENT_MODE) -> list[ArcRewardComponent]:
    """Component reward functions for logging (train_* only in program mode)."""
    names = [n for n in COMPONENTS if agent_mode == "program" or n not in _PROGRAM_ONLY]
    return [ArcRewardComponent(n, agent_mode) for n in names]


def make_reward_funcs(
    mode: str, agent_mode: str = "repl", components: bool = True
) -> tuple[list[Callable[..., list]], list[float]]:
    """(reward_funcs, reward_weights) for GRPOConfig: the reward with weight 1, components with weight 0."""
    funcs: list[Callable[..., list]] = [make_reward_func(mode, agent_mode)]
    if components:
        funcs += make_component_reward_funcs(agent_mode)
    return funcs, [1.0] + [0.0] * (len(funcs) - 1)


def breakdowns(
    outcomes: list[Any], task_jsons: list[str], agent_mode: str = defaults.AGENT_MODE
) -> list[RewardBreakdown | None]:
    """Per-completion breakdowns (None where the outcome is missing), e.g. for logging tables."""
    tasks = _parse_tasks(task_jsons, None, "breakdowns")
    out: list[RewardBreakdown | None] = []
    for task, raw in zip(tasks, outcomes):
        outcome = as_outcome(raw)
        out.append(evaluate_outcome(outcome, task, agent_mode) if outcome is not None else None)
    return out


def _batch(name: str, prompts: Any, completions: Any, kwargs: dict[str, Any]) -> tuple[list[ArcTask], list[Any]]:
    task_jsons = kwargs.get("task_json")
    if task_jsons is None:
        raise ValueError(
            f"{name}: no 'task_json' column among the reward kwargs ({sorted(kwargs)}); "
            "build the dataset with arc_trl.data.build_dataset"
        )
    size = len(completions) if completions is not None else len(prompts) if prompts is not None else len(task_jsons)
    if len(task_jsons) != size:
        raise ValueError(f"{name}: {len(task_jsons)} task_json values for {size} completions")
    outcomes = kwargs.get("outcome")
    if outcomes is None:
        logger.warning("%s: no 'outcome' field from the rollout; every completion gets the lowest reward", name)
        outcomes = [None] * size
    elif not isinstance(outcomes, (list, tuple)) or len(outcomes) != size:
        count = len(outcomes) if isinstance(outcomes, (list, tuple)) else type(outcomes).__name__
        raise ValueError(f"{name}: expected {size} outcomes (one per completion), got {count}")
    return _parse_tasks(task_jsons, kwargs.get("task_id"), name), list(outcomes)


def _parse_tasks(task_jsons: list[str], task_ids: list[str] | None, name: str) -> list[ArcTask]:
    """Parse each task_json once per batch (the G completions of a prompt share it)."""
    cache: dict[str, ArcTask] = {}
    tasks = []
    for i, text in enumerate(task_jsons):
        if not isinstance(text, str):
            raise TypeError(f"{name}: task_json must be JSON strings, got {type(text).__name__} at row {i}")
        if text not in cache:
            task_id = str(task_ids[i]) if task_ids is not None and i < len(task_ids) else f"row {i}"
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as err:
                raise ValueError(f"{name}: task_json of {task_id!r} is not valid JSON: {err}") from None
            cache[text] = ArcTask.from_json(task_id, obj, source="task_json")
        tasks.append(cache[text])
    return tasks
