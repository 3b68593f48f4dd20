"""What the entry point does after the guard ended a run: stop with a reason, or roll back and go on.

Rollback = re-create the trainer and resume from the last `ok` checkpoint (transformers' resume restores the model,
optimizer, scheduler, RNG states and data position), with the learning rate multiplied by `collapse_lr_scale` per
rollback; at most `collapse_max_rollbacks` times, then stop. Checkpoints saved after the last ok one are moved to
`output_dir/collapse_guard/discarded/rollback-K/` (kept for inspection, out of `--resume_from_checkpoint auto`'s way).
"""

from __future__ import annotations

import gc
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


def release_trainer(trainer) -> None:
    """Free what a trainer holds before the next one is built after a rollback (sandbox, weight-sync group to a vLLM
    server, colocated engine, GPU cache). Best effort: the distributed state is left alone (the trainer shares it)."""
    trainer.close()
    generation = getattr(trainer, "vllm_generation", None)
    client = getattr(generation, "vllm_client", None)
    if client is not None:
        client.close_communicator()
    if getattr(generation, "llm", None) is not None:
        generation.llm = None
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass
