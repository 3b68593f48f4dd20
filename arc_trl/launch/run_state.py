"""Where a training run stands, read from its output folder (HF Trainer conventions).

- finished:  `run_summary.json` exists (written by `arc-trl train` at the very end).
- resumable: at least one complete `checkpoint-N/` folder (one holding `trainer_state.json`; a checkpoint cut off
  while saving lacks it and is ignored). Resume from the largest such N.
- new:       anything else (missing folder, or a run that died before its first checkpoint: it restarts from scratch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SUMMARY_FILE = "run_summary.json"
TRAINER_STATE_FILE = "trainer_state.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

NEW, RESUMABLE, FINISHED = "new", "resumable", "finished"


@dataclass(frozen=True)
class RunState:
    status: str
    checkpoint: Path | None = None  # the checkpoint to resume from (resumable runs only)

    def describe(self) -> str:
        return f"{self.status} ({self.checkpoint.name})" if self.checkpoint else self.status


def complete_checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    """`(step, path)` of every complete checkpoint folder, sorted by step."""
    if not output_dir.is_dir():
        return []
    found = []
    for child in output_dir.iterdir():
        match = _CHECKPOINT.match(child.name)
        if match and child.is_dir() and (child / TRAINER_STATE_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def latest_checkpoint(output_dir: Path) -> Path | None:
    checkpoints = complete_checkpoints(Path(output_dir))
    return checkpoints[-1][1] if checkpoints else None


def run_state(output_dir: str | Path) -> RunState:
    output_dir = Path(output_dir)
    if (output_dir / SUMMARY_FILE).is_file():
        return RunState(FINISHED)
    checkpoint = latest_checkpoint(output_dir)
    return RunState(RESUMABLE, checkpoint) if checkpoint else RunState(NEW)
