"""The settings of a rollout (`RolloutSettings`).

Their defaults are written once, in `arc_trl.config.defaults`, and the names of their choices in
`arc_trl.config.choices`, which `arc_trl.config.ArcConfig` (training) and `arc-trl evaluate generate`
(`arc_trl.eval.generation_settings`) read too.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_trl.config import defaults
from arc_trl.config.choices import ROLLOUT_SCHEDULINGS


@dataclass
class RolloutSettings:
    agent_mode: str = defaults.AGENT_MODE  # repl | program
    max_turns: int = defaults.MAX_TURNS
    max_tokens_per_turn: int | None = defaults.MAX_TOKENS_PER_TURN
    max_completion_length: int = defaults.MAX_COMPLETION_LENGTH  # episode budget: model + environment tokens
    scheduling: str = defaults.ROLLOUT_SCHEDULING  # lockstep | per_episode (see run_episodes)

    def __post_init__(self) -> None:
        if self.scheduling not in ROLLOUT_SCHEDULINGS:
            raise ValueError(f"rollout scheduling {self.scheduling!r} is not one of {', '.join(ROLLOUT_SCHEDULINGS)}")
