"""The settings of a rollout (`RolloutSettings`) and every default of an episode, each written once.

`arc_trl.config.ArcConfig` (training), the rollout (`arc_trl.rollout`) and `evaluate.py generate`
(`arc_trl.eval.generation_settings`) all take their choices and defaults from here. This module imports nothing of
arc_trl, so the config can read it without pulling in the rollout (`arc_trl/rollout/__init__.py` loads lazily).
"""

from __future__ import annotations

from dataclasses import dataclass

AGENT_MODES = ("repl", "program")  # repl: multi-turn REPL ending with SUBMIT; program: one-turn transform()
SCHEDULING = ("lockstep", "per_episode")  # see arc_trl.rollout.arc_rollout.run_episodes

DEFAULT_AGENT_MODE = "repl"
DEFAULT_MAX_TURNS = 4
DEFAULT_MAX_TOKENS_PER_TURN = None  # None: the episode budget
DEFAULT_MAX_COMPLETION_LENGTH = 1024  # outside training; the trainer's is GRPOConfig.max_completion_length
DEFAULT_SCHEDULING = "lockstep"


@dataclass
class RolloutSettings:
    agent_mode: str = DEFAULT_AGENT_MODE  # repl | program
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens_per_turn: int | None = DEFAULT_MAX_TOKENS_PER_TURN
    max_completion_length: int = DEFAULT_MAX_COMPLETION_LENGTH  # episode budget: model + environment tokens
    scheduling: str = DEFAULT_SCHEDULING  # lockstep | per_episode (see run_episodes)

    def __post_init__(self) -> None:
        if self.scheduling not in SCHEDULING:
            raise ValueError(f"rollout scheduling {self.scheduling!r} is not one of {', '.join(SCHEDULING)}")
