"""From `ArcConfig`'s `collapse_*` keys to `DetectorSettings` (kept apart so that config.py stays import-light)."""

from __future__ import annotations

import json
from typing import Any

from arc_trl.collapse.detector import DetectorSettings, rules_with_overrides, state_rules_with_overrides


def parse_thresholds(value: Any) -> dict | None:
    """`collapse_thresholds` as given in YAML (a mapping) or on the command line (a JSON string)."""
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            parsed = json.loads(value)
        except ValueError as error:
            raise ValueError(f"collapse_thresholds is not valid JSON: {error}: {value!r}") from error
        if isinstance(parsed, dict):
            return parsed
    raise ValueError(f"collapse_thresholds must be a mapping of metric -> rule fields, got {value!r}")


def detector_settings(arc) -> DetectorSettings:
    return DetectorSettings(
        rules=rules_with_overrides(arc.collapse_thresholds),
        state_rules=state_rules_with_overrides(arc.collapse_thresholds),
        baseline_steps=arc.collapse_baseline_steps,
        window=arc.collapse_window,
        min_signals=arc.collapse_min_signals,
    ).validate()
