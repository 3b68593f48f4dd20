"""`CollapseGuardCallback`: runs the detector on every logged training step and acts on a collapse.

transformers hooks used (no Trainer method is overridden here):
- `on_train_begin` (once per `train()` call: the first attempt and each rollback's): starts the attempt afresh,
  rebuilds the detector from `state.log_history` when the run resumes (same baseline, healthy level and window as
  before the checkpoint) and applies the rollback's learning-rate multiplier to the restored optimizer/scheduler.
  In `rollback` mode a fresh run first saves `checkpoint-0` (the initial weights, ok by definition), so that a
  collapse before the first confirmed checkpoint still has somewhere to go.
- `on_log`: one `Verdict` per training log; adds `collapse_guard/level` (0 ok, 1 warn, 2 collapse) and
  `collapse_guard/fired` to the logs (W&B, trackio, trainer_state.json), appends the verdict to
  `output_dir/collapse_guard.jsonl`, prints the reasons of non-ok steps. On `collapse` with action `stop` or
  `rollback` it ends training (`control.should_training_stop`, no checkpoint of the collapsed state); the loop
  (`arc_trl/collapse/loop.py`) then stops, or loads the last ok checkpoint into the same trainer and goes on.
- `on_save`: records the new checkpoint as *pending*. A checkpoint saved after step s holds the weights that step s
  updated, which only the episodes sampled *from* them show: it becomes the `last_ok_checkpoint` once every verdict
  up to step s + `confirm_steps` (the steps between two generations, 1 by default) is `ok`, and is rejected if one
  is not. The trainer's checkpoint rotation keeps the last ok one (`protected_checkpoints`, see
  `ArcGRPOTrainer._save_checkpoint`).

It must be the first callback (`loop.attach_collapse_guard`, called by `ArcGRPOTrainer.__init__`, inserts it at
position 0) so that reporters see its keys.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from arc_trl.collapse.detector import COLLAPSE, OK, CollapseDetector, DetectorSettings, Verdict
from arc_trl.integrations.trl_internals import scale_scheduler_lr
from arc_trl.view.wandb_tables import EventTable

ACTIONS = ("off", "warn", "stop", "rollback")
LOG_FILE = "collapse_guard.jsonl"
CHECKPOINT_FILE = "collapse_guard.json"  # inside each checkpoint: its label (pending/ok/rejected), the lr multiplier
PENDING = "pending"


def is_train_log(logs: dict[str, Any]) -> bool:
    """GRPO training logs carry `reward` (evaluation logs carry `eval_reward`, the end-of-run summary neither)."""
    return "reward" in logs


class CollapseGuardCallback(TrainerCallback):
    def __init__(self, settings: DetectorSettings, action: str, output_dir: str | os.PathLike,
                 lr_multiplier: float = 1.0, attempt: int = 0, is_main_process: bool = True,
                 confirm_steps: int = 1) -> None:
        if action not in ACTIONS[1:]:
            raise ValueError(f"collapse_guard={action!r} is not one of {', '.join(ACTIONS)}")
        self.settings = settings
        self.action = action
        self.output_dir = Path(output_dir)
        self.lr_multiplier = lr_multiplier
        self.attempt = attempt
        self.is_main_process = is_main_process
        self.detector = CollapseDetector(settings)
        self.last_verdict: Verdict | None = None
        self.last_ok_checkpoint: Path | None = None
        self.collapse: Verdict | None = None  # the verdict that ended training (stop / rollback)
        self.confirm_steps = max(1, confirm_steps)
        self.pending: list[int] = []  # steps of checkpoints saved but not yet confirmed by later verdicts
        self.last_bad_step = 0  # the latest step whose verdict was not ok
        self.resume_from: str | None = None  # the checkpoint this attempt's train() resumes from (set by the loop)
        self.save_initial: Callable[[], None] | None = None  # saves checkpoint-0 at the next fresh train begin
        self.wandb_events = EventTable()  # the events worth a row (not ok steps, collapses, rollbacks) in W&B

    def start_attempt(self, attempt: int, lr_multiplier: float, resume_from: str | os.PathLike | None) -> None:
        """Before each `train()` call: which attempt (rollbacks so far), its learning-rate multiplier, and the
        checkpoint it resumes from (None: a fresh start)."""
        self.attempt = attempt
        self.lr_multiplier = lr_multiplier
        self.resume_from = str(resume_from) if resume_from else None

    # ------------------------------------------------------------------------------------------------ trainer hooks
    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        self.detector = CollapseDetector(self.settings)
        self.last_verdict, self.collapse, self.last_ok_checkpoint = None, None, None
        self.pending, self.last_bad_step = [], 0
        for entry in state.log_history:  # resumed: the checkpoint's history rebuilds baseline and window
            if is_train_log(entry) and entry.get("step", 0) <= state.global_step:
                self.last_verdict = self.detector.update(entry.get("step", 0), entry)
        resumed = self.resume_from or (self._checkpoint(state.global_step) if state.global_step > 0 else None)
        if resumed is not None:
            saved = read_checkpoint_info(resumed)
            factor = self.lr_multiplier / saved.get("lr_multiplier", 1.0)
            if factor != 1.0:
                scale_learning_rate(optimizer, lr_scheduler, factor)
            if saved.get("label", OK) == OK:
                self.last_ok_checkpoint = Path(resumed)
            elif saved.get("label") == PENDING:  # resumed from a checkpoint not judged yet: judge it now
                self.pending.append(state.global_step)
        self.log_event({"event": "train_begin", "step": state.global_step, "attempt": self.attempt,
                        "action": self.action, "lr_multiplier": self.lr_multiplier, "resume_from": resumed,
                        "baseline_ready": self.detector.baseline is not None})
        if resumed is None and state.global_step == 0 and self.save_initial is not None:
            self.save_initial()  # checkpoint-0: the initial weights, the rollback target before any confirmed save
            self.save_initial = None
            self._mark(0, OK)
            self.last_ok_checkpoint = self._checkpoint(0)
            self.log_event({"event": "save", "step": 0, "checkpoint": str(self._checkpoint(0)), "label": OK,
                            "initial": True})
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or not is_train_log(logs):
            return control
        verdict = self.detector.update(state.global_step, logs)
        self.last_verdict = verdict
        if verdict.label != OK:
            self.last_bad_step = verdict.step
        self._settle_pending(verdict.step)
        extra = {"collapse_guard/level": verdict.level,
                 "collapse_guard/fired": len(verdict.fired),
                 "collapse_guard/lr_multiplier": self.lr_multiplier}
        logs.update(extra)  # the reporters called after this callback log these too
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(extra)
        self.log_event({"event": "step", "attempt": self.attempt, **verdict.to_dict()})
        if verdict.label != OK and self.is_main_process:
            print(f"[collapse-guard] step {verdict.step}: {verdict.label.upper()}: {verdict.reasons()}",
                  file=sys.stderr, flush=True)
        if verdict.label == COLLAPSE and self.action in ("stop", "rollback"):
            self.collapse = verdict
            control.should_training_stop = True
            control.should_save = False  # never checkpoint the collapsed state under checkpoint-N
            self.log_event({"event": "collapse", "step": verdict.step, "attempt": self.attempt, "action": self.action,
                            "reasons": verdict.reasons(),
                            "last_ok_checkpoint": str(self.last_ok_checkpoint) if self.last_ok_checkpoint else None})
        return control

    def on_save(self, args, state, control, **kwargs):
        self._mark(state.global_step, PENDING)
        self.pending.append(state.global_step)
        self.log_event({"event": "save", "step": state.global_step,
                        "checkpoint": str(self._checkpoint(state.global_step)), "label": PENDING})
        return control

    def _settle_pending(self, step: int) -> None:
        """Confirm (ok) or reject the pending checkpoints that `step`'s verdict is the last judge of."""
        for saved in [s for s in self.pending if step >= s + self.confirm_steps]:
            self.pending.remove(saved)
            label = OK if self.last_bad_step <= saved else "rejected"
            self._mark(saved, label)
            if label == OK:
                self.last_ok_checkpoint = self._checkpoint(saved)
            self.log_event({"event": "checkpoint", "step": saved, "label": label, "judged_at": step})

    def _checkpoint(self, step: int) -> Path:
        return self.output_dir / f"checkpoint-{step}"

    def _mark(self, step: int, label: str) -> None:
        checkpoint = self._checkpoint(step)
        if self.is_main_process and checkpoint.is_dir():
            (checkpoint / CHECKPOINT_FILE).write_text(json.dumps(
                {"step": step, "label": label, "lr_multiplier": self.lr_multiplier, "rollbacks": self.attempt}))

    # ------------------------------------------------------------------------------------------------ helpers
    def protected_checkpoints(self) -> set[str]:
        """Checkpoints the trainer's rotation (`save_total_limit`) must not delete."""
        return {str(self.last_ok_checkpoint)} if self.last_ok_checkpoint else set()

    def log_event(self, record: dict[str, Any]) -> None:
        """Append `record` (with the time) to output_dir/collapse_guard.jsonl (main process only)."""
        if not self.is_main_process:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        with open(self.output_dir / LOG_FILE, "a") as f:
            f.write(json.dumps({"time": round(time.time(), 3), **record}) + "\n")
        self.wandb_events.add(record)  # warnings, collapses, rollbacks: a W&B table (no-op without a W&B run)


def scale_learning_rate(optimizer, lr_scheduler, factor: float) -> None:
    """Multiply the current and the scheduled learning rate (restored from a checkpoint) by `factor`."""
    if lr_scheduler is not None and hasattr(lr_scheduler, "base_lrs"):
        lr_scheduler.base_lrs = [lr * factor for lr in lr_scheduler.base_lrs]
        scale_scheduler_lr(lr_scheduler, factor)
    if optimizer is not None:
        for group in optimizer.param_groups:
            group["lr"] *= factor
            if "initial_lr" in group:
                group["initial_lr"] *= factor


def read_checkpoint_info(checkpoint: str | os.PathLike) -> dict[str, Any]:
    """What the guard recorded in a checkpoint (label, lr_multiplier, rollbacks); {} when nothing."""
    try:
        return json.loads((Path(checkpoint) / CHECKPOINT_FILE).read_text())
    except (OSError, ValueError):
        return {}
