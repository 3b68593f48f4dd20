"""The pieces of a stop and a rollback that need no trainer: the stop's exit status and report, and moving the
checkpoints a rollback discards out of the way. The loop itself (stop, or load the last ok checkpoint into the same
trainer and go on) is `arc_trl/collapse/loop.py`.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from arc_trl.collapse.detector import Verdict

COLLAPSE_EXIT_CODE = 3  # sweeps and HTCondor show the run as failed with this code (and collapse_guard_stop.json)
STOP_FILE = "collapse_guard_stop.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


class CollapseStopped(SystemExit):
    """Training stopped by the collapse guard; exit status COLLAPSE_EXIT_CODE, the reason in output_dir/STOP_FILE."""

    def __init__(self, message: str) -> None:
        super().__init__(COLLAPSE_EXIT_CODE)
        self.message = message

    def __str__(self) -> str:
        return self.message


def discard_checkpoints_after(output_dir: str | Path, step: int, rollback: int) -> list[Path]:
    """Move `checkpoint-N` folders with N > step out of the way; returns their new paths."""
    output_dir = Path(output_dir)
    moved = []
    for child in sorted(output_dir.iterdir()) if output_dir.is_dir() else []:
        match = _CHECKPOINT.match(child.name)
        if match and int(match.group(1)) > step:
            target = output_dir / "collapse_guard" / "discarded" / f"rollback-{rollback}" / child.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(child), str(target))
            moved.append(target)
    return moved


def write_stop_report(output_dir: str | Path, verdict: Verdict, action: str, rollbacks: int, saved_to: str | None,
                      last_ok_checkpoint: str | None) -> str:
    """Write output_dir/collapse_guard_stop.json and return the one-line reason shown on stderr."""
    reason = (f"collapse at step {verdict.step} ({verdict.reasons()}); action {action}, {rollbacks} rollback(s) done")
    report = {"step": verdict.step, "action": action, "rollbacks": rollbacks, "reason": reason,
              "verdict": verdict.to_dict(), "collapsed_model": saved_to, "last_ok_checkpoint": last_ok_checkpoint,
              "exit_code": COLLAPSE_EXIT_CODE}
    path = Path(output_dir) / STOP_FILE
    path.write_text(json.dumps(report, indent=2))
    return reason
