"""Collapse guard: per-step signals, a detector (drift against a frozen baseline, breaks and states against the
run's healthy level) and warn/stop/rollback actions.

See docs/collapse.md. Modules: `signals` (repetition over model tokens), `detector` (pure rules and labels),
`settings` (from ArcConfig), `callback` (the TrainerCallback), `loop` (train, then stop or roll back in place),
`rollback` (stop report, discarded checkpoints); the private trainer members the rollback needs are in
`arc_trl.integrations.trl_internals`.
"""

from arc_trl.collapse.detector import (
    COLLAPSE,
    DEFAULT_RULES,
    DEFAULT_STATE_RULES,
    OK,
    WARN,
    CollapseDetector,
    DetectorSettings,
    RewardFloorRule,
    SignalRule,
    StateRule,
    Verdict,
)
from arc_trl.collapse.signals import episode_repetition, repeated_token_mask, repetition_stats

__all__ = [
    "COLLAPSE", "DEFAULT_RULES", "DEFAULT_STATE_RULES", "OK", "WARN", "CollapseDetector", "DetectorSettings",
    "RewardFloorRule", "SignalRule", "StateRule", "Verdict",
    "episode_repetition", "repeated_token_mask", "repetition_stats",
]
