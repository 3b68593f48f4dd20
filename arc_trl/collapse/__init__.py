"""Collapse guard: per-step signals, a detector with baseline-relative thresholds, and warn/stop/rollback actions.

See docs/collapse.md. Modules: `signals` (repetition over model tokens), `detector` (pure rules and labels),
`settings` (from ArcConfig), `callback` (the TrainerCallback), `rollback` (what the entry point does after a stop).
"""

from arc_trl.collapse.detector import (
    COLLAPSE,
    DEFAULT_RULES,
    OK,
    WARN,
    CollapseDetector,
    DetectorSettings,
    SignalRule,
    Verdict,
)
from arc_trl.collapse.signals import episode_repetition, repeated_token_mask, repetition_stats

__all__ = [
    "COLLAPSE", "DEFAULT_RULES", "OK", "WARN", "CollapseDetector", "DetectorSettings", "SignalRule", "Verdict",
    "episode_repetition", "repeated_token_mask", "repetition_stats",
]
