"""Training under the collapse guard: `train_with_guard` (what `ArcGRPOTrainer.train` runs, so a Python caller and
`arc-trl train` get the same guard) calls transformers' `Trainer.train` and, after a collapse, stops the run or rolls
it back in place. `attach_collapse_guard` (called by `ArcGRPOTrainer.__init__`) adds the guard's callback.

Rollback, in place: the trainer that collapsed — with its model, its colocated vLLM engine (or its weight-sync group
to a vLLM server), its sandbox pool — is kept; `Trainer.train(resume_from_checkpoint=last_ok)` is called again on it.
transformers' resume path loads the checkpoint into the objects the trainer already holds: the weights into
`trainer.model` (`load_state_dict`, or the PEFT adapter's `load_adapter`, both copying into the existing
parameters), the optimizer state into the existing optimizer (not re-created: `create_optimizer` keeps an optimizer
it already has), a scheduler re-created on that optimizer and loaded, the trainer state (global step, log history),
the RNG states and the data position. Before that call the loop clears the collapsed optimizer state in place (so
that two copies never coexist in memory) and resets TRL's generation state (`trl_internals.reset_generation_state`:
the weights are synced to vLLM at the next generation even when the restored global step equals the step of the
last sync). The callback then scales the restored learning rate by `collapse_lr_scale` per rollback. Nothing is
built twice, so a rollback costs no memory beyond the loaded checkpoint (issue 24: a second trainer had built a
second colocated engine beside the first, 59.9 GiB device peak against 33.0).

The rollback target is the last *confirmed ok* checkpoint; in `rollback` mode a fresh run saves `checkpoint-0`
first (the initial weights), so a collapse before the first confirmed save rolls back to the start. At most
`collapse_max_rollbacks` times, then the next collapse stops the run. Checkpoints saved after the rollback target
are moved to `output_dir/collapse_guard/discarded/rollback-K/` (kept for inspection, out of
`--resume_from_checkpoint auto`'s way).
"""

from __future__ import annotations

import gc
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from arc_trl.collapse.rollback import CollapseStopped, discard_checkpoints_after, write_stop_report


def train_with_guard(trainer, resume: str | bool | None, train_once: Callable[[str | None], Any]) -> Any:
    """`ArcGRPOTrainer.train`: call `train_once(resume)` (transformers' `Trainer.train`) under the trainer's collapse
    guard (`trainer.collapse_guard`, docs/collapse.md; None when `collapse_guard` is off): after a collapse, `stop`
    raises `CollapseStopped` (exit status 3, the reason in output_dir/collapse_guard_stop.json); `rollback` loads
    the last ok checkpoint into the same trainer and calls `train_once` again with a scaled learning rate, at most
    collapse_max_rollbacks times. Returns the last call's `TrainOutput`; sets `trainer.collapse_rollbacks`."""
    from arc_trl.collapse.callback import read_checkpoint_info

    arc, args, guard = trainer.arc_config, trainer.args, trainer.collapse_guard
    resume = _checkpoint_path(resume, args.output_dir)
    saved = read_checkpoint_info(resume) if resume else {}  # a restarted run keeps its rollbacks' lr and count
    multiplier, rollbacks = saved.get("lr_multiplier", 1.0), saved.get("rollbacks", 0)
    base_lr = trainer.base_learning_rate  # args.learning_rate when the trainer was built (a later call rescales it)
    args.learning_rate = base_lr * multiplier  # a fresh start uses it; a resume rescales the restored optimizer
    if guard is not None and arc.collapse_guard == "rollback" and resume is None:
        from arc_trl.integrations.trl_internals import save_checkpoint_now

        guard.save_initial = lambda: save_checkpoint_now(trainer)
    while True:
        if guard is not None:
            guard.start_attempt(rollbacks, multiplier, resume)
        output = train_once(resume)
        collapse = guard.collapse if guard is not None else None
        if collapse is None:
            trainer.collapse_rollbacks = rollbacks
            return output
        last_ok = str(guard.last_ok_checkpoint) if guard.last_ok_checkpoint else None
        if arc.collapse_guard == "rollback" and rollbacks < arc.collapse_max_rollbacks and last_ok:
            rollbacks += 1
            multiplier *= arc.collapse_lr_scale
            args.learning_rate = base_lr * multiplier
            ok_step = int(last_ok.rsplit("-", 1)[1])
            if trainer.accelerator.is_main_process:
                discard_checkpoints_after(args.output_dir, ok_step, rollbacks)
            trainer.accelerator.wait_for_everyone()
            print(f"[collapse-guard] rollback {rollbacks}/{arc.collapse_max_rollbacks}: collapse at step "
                  f"{collapse.step}; loading {last_ok} into the same trainer, learning rate x{multiplier:g} "
                  f"({base_lr * multiplier:g})", file=sys.stderr, flush=True)
            guard.log_event({"event": "rollback", "rollback": rollbacks, "from_step": collapse.step,
                             "resume_from": last_ok, "lr_multiplier": multiplier})
            prepare_rollback(trainer)
            resume = last_ok
            continue
        trainer.collapse_rollbacks = rollbacks
        _stop(trainer, arc, args, guard, collapse, rollbacks, last_ok)


def _checkpoint_path(resume: str | bool | None, output_dir: str) -> str | None:
    """`Trainer.train`'s `resume_from_checkpoint` as a path: True is the last checkpoint in output_dir (as
    transformers resolves it), False or None a fresh start."""
    if resume is True:
        from transformers.trainer_utils import get_last_checkpoint

        found = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
        if found is None:
            raise ValueError(f"No valid checkpoint found in output directory ({output_dir})")
        return found
    return resume or None


def prepare_rollback(trainer) -> None:
    """Before `trainer.train(resume_from_checkpoint=...)` is called again on a trainer that collapsed: free the
    collapsed optimizer state and gradients (the checkpoint's are loaded in their place; a checkpoint without
    optimizer state then starts the optimizer afresh, as a new trainer would) and reset TRL's generation state."""
    from arc_trl.integrations.trl_internals import reset_generation_state

    optimizer = getattr(trainer, "optimizer", None)
    if optimizer is not None:
        optimizer.state.clear()
    model = getattr(trainer, "model", None)
    if model is not None:
        model.zero_grad(set_to_none=True)
    reset_generation_state(trainer)
    gc.collect()
    _empty_device_cache()


def _stop(trainer, arc, args, guard, collapse, rollbacks: int, last_ok: str | None):
    saved_to = os.path.join(args.output_dir, "collapse_guard", f"collapsed-step-{collapse.step}")
    trainer.save_model(saved_to)  # the collapsed weights, for inspection (not a resumable checkpoint-N)
    trainer.save_state()
    action = arc.collapse_guard
    if action == "rollback" and rollbacks < arc.collapse_max_rollbacks:
        action = "rollback (no ok checkpoint to roll back to: stop)"
    if trainer.accelerator.is_main_process:
        reason = write_stop_report(args.output_dir, collapse, action, rollbacks, saved_to, last_ok)
    else:
        reason = f"collapse at step {collapse.step}"
    print(f"[collapse-guard] STOPPED: {reason}. Report: {args.output_dir}/collapse_guard_stop.json",
          file=sys.stderr, flush=True)
    raise CollapseStopped(reason)


def attach_collapse_guard(trainer):
    """Insert a `CollapseGuardCallback` configured by `trainer.arc_config` first in the trainer's callbacks and return
    it (None when `collapse_guard` is off). `train_with_guard` sets its attempt and learning-rate multiplier."""
    arc, args = trainer.arc_config, trainer.args
    if arc.collapse_guard == "off":
        return None
    from arc_trl.collapse.callback import CollapseGuardCallback
    from arc_trl.collapse.settings import detector_settings

    # optimizer steps between two generations: a checkpoint is judged by the first verdict on episodes sampled from it
    per_generation = getattr(args, "steps_per_generation", None) or 1
    accumulation = getattr(args, "gradient_accumulation_steps", 1) or 1
    confirm = math.ceil(per_generation * (getattr(args, "num_iterations", 1) or 1) / accumulation)
    confirm += arc.async_rollouts  # one step off-policy: a checkpoint's episodes are trained one step later
    guard = CollapseGuardCallback(detector_settings(arc), arc.collapse_guard, args.output_dir,
                                  is_main_process=trainer.accelerator.is_main_process, confirm_steps=confirm)
    trainer.callback_handler.callbacks.insert(0, guard)  # first, so that reporters log the keys it adds
    return guard


def _empty_device_cache() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass
