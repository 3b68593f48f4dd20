"""The multi-turn REPL rollout (TRL `rollout_func`) and its generation backends."""

from arc_trl.rollout.arc_rollout import ArcRollout, RolloutSettings, run_episodes, task_from_row
from arc_trl.rollout.episode import Episode
from arc_trl.rollout.generators import TrainerGenerator, TransformersGenerator, VLLMGenerator

__all__ = [
    "ArcRollout", "RolloutSettings", "run_episodes", "task_from_row", "Episode",
    "TrainerGenerator", "TransformersGenerator", "VLLMGenerator",
]
