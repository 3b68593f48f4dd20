"""Checkpoint rotation that spares named checkpoints (transformers' `rotate_checkpoints` spares only the newest and
the best one; the collapse guard also needs its last ok checkpoint)."""

from __future__ import annotations

import shutil
from pathlib import Path

from transformers.trainer_utils import sort_checkpoints


def rotate_keeping(output_dir: str | Path, save_total_limit: int, keep: set[str]) -> list[str]:
    """Delete the oldest `checkpoint-N` folders beyond `save_total_limit`, never the newest one nor any in `keep`.
    Returns the deleted paths."""
    checkpoints = [str(Path(c).resolve()) for c in sort_checkpoints(str(output_dir), use_mtime=False)]
    if len(checkpoints) <= save_total_limit:
        return []
    protected = {str(Path(p).resolve()) for p in keep} | {checkpoints[-1]}
    remaining, deleted = len(checkpoints), []
    for checkpoint in checkpoints:  # oldest first
        if remaining <= save_total_limit:
            break
        if checkpoint not in protected:
            shutil.rmtree(checkpoint, ignore_errors=True)
            deleted.append(checkpoint)
            remaining -= 1
    return deleted
