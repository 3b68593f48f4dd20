"""The settings of a rollout (`RolloutSettings`) and the choices an episode's settings take.

Their defaults are written once, in `arc_trl.config.defaults`, which `arc_trl.config.ArcConfig` (training) and `arc-trl
evaluate generate` (`arc_trl.eval.generation_settings`) read too. This module imports nothing of arc_trl but that, so
the config can read it without pulling in the rollout (`arc_trl/rollout/__init__.py` loads lazily).
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_trl.config import defaults

AGENT_MODES = defaults.AGENT_MODES  # the one list (arc_trl.config.defaults)
SCHEDULING = ("lockstep", "per_episode")  # see arc_trl.rollout.arc_rollout.run_episodes


@dataclass
class RolloutSettings:
    agent_mode: str = defaults.AGENT_MODE  # repl | program
    max_turns: int = defaults.MAX_TURNS
    max_tokens_per_turn: int | None = defaults.MAX_TOKENS_PER_TURN
    max_completion_length: int = defaults.MAX_COMPLETION_LENGTH  # episode budget: model + environment tokens
    scheduling: str = defaults.ROLLOUT_SCHEDULING  # lockstep | per_episode (see run_episodes)

    def __post_init__(self) -> None:
        if self.scheduling not in SCHEDULING:
            raise ValueError(f"rollout scheduling {self.scheduling!r} is not one of {', '.join(SCHEDULING)}")
