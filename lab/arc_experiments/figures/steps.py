"""results/gpu_step_summary.json through benchmarks/step_summary.py (the step summary's own code, a script of the
checkout), from the profiles and the inputs named in results/gpu_step_speed/summary_inputs.json."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

INPUTS = "results/gpu_step_speed/summary_inputs.json"


def _step_summary(root: Path):
    path = root / "benchmarks" / "step_summary.py"
    spec = importlib.util.spec_from_file_location("step_summary", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary(root: Path) -> dict[str, Any]:
    """`step_summary.summary` of each shape's (baseline, after) profiles, targets and commands, then the shapes not
    measured (as `python benchmarks/step_summary.py ... --out` writes them)."""
    inputs = json.loads((root / INPUTS).read_text())
    bad = [name for name, pair in inputs["shapes"].items() if len(pair) != 2]
    if bad:
        raise ValueError(f"{INPUTS}: shapes {bad} need [BASELINE_JSON, AFTER_JSON]")
    module = _step_summary(root)
    shapes = {name: tuple(json.loads((root / path).read_text()) for path in pair)
              for name, pair in inputs["shapes"].items()}
    targets = {name: module.parse_target(text) for name, text in inputs["targets"].items()}
    result = module.summary(shapes, inputs["date"], inputs["commands"], targets)
    return result | {name: {"not_measured": why} for name, why in inputs["not_measured"].items()}
