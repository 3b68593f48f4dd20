"""Launching trainings: YAML sweeps, local and HTCondor launchers, and the vLLM server wrapper (docs/sweeps.md)."""

from arc_trl.launch.launch_config import LAUNCH_DEFAULTS, gpu_split
from arc_trl.launch.launchers import CondorLauncher, LocalLauncher, run_sweep
from arc_trl.launch.run_state import RunState, latest_checkpoint, run_state
from arc_trl.launch.sweep import Run, SweepError, SweepSpec, expand_sweep, load_sweep

__all__ = [
    "LAUNCH_DEFAULTS",
    "CondorLauncher",
    "LocalLauncher",
    "Run",
    "RunState",
    "SweepError",
    "SweepSpec",
    "expand_sweep",
    "gpu_split",
    "latest_checkpoint",
    "load_sweep",
    "run_state",
    "run_sweep",
]
