"""The multi-turn REPL rollout (TRL `rollout_func`) and its generation backends.

The names below load on first use (PEP 562), so that `arc_trl.rollout.settings`, which `arc_trl.config` reads, comes
without the rollout's torch/transformers imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_HOMES = {
    "ArcRollout": "arc_rollout", "run_episodes": "arc_rollout", "task_from_row": "arc_rollout",
    "RolloutSettings": "settings", "Episode": "episode",
    "TrainerGenerator": "generators", "TransformersGenerator": "generators", "VLLMGenerator": "generators",
}
__all__ = [
    "ArcRollout", "RolloutSettings", "run_episodes", "task_from_row", "Episode",
    "TrainerGenerator", "TransformersGenerator", "VLLMGenerator",
]

if TYPE_CHECKING:
    from arc_trl.rollout.arc_rollout import ArcRollout, run_episodes, task_from_row
    from arc_trl.rollout.episode import Episode
    from arc_trl.rollout.generators import TrainerGenerator, TransformersGenerator, VLLMGenerator
    from arc_trl.rollout.settings import RolloutSettings


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
