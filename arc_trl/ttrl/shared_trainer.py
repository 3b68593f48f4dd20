"""One `ArcGRPOTrainer` for every task of a test-time run, each task started from exactly the start model.

Building a trainer loads the model and, with `use_vllm: true, vllm_mode: colocate`, starts a vLLM engine; a run of
hundreds of tasks would spend most of its time there. So the trainer is built once (at the first task that runs) and
`reset_for_task` puts it back, before every task, into the state a newly built one would have:

- the weights: `StartWeights`, a CPU copy of the parameters taken right after the build, copied back in place (LoRA:
  the trainable adapter, B = 0, so the policy is the start model; full fine-tuning, and a LoRA whose vLLM sync is
  TRL's in-place merge, which rounds the base at every sync: every parameter);
- no optimizer, no LR scheduler (`Trainer.train` builds both when they are None), gradients freed, a new
  `TrainerState` (global step 0) and `TrainerControl`;
- TRL's generation state (`trl_internals.start_new_run`): the first generation of the task, or its first attempt,
  pushes these weights to the colocated engine even though its step number equals one already synced;
- the task's rows as `train_dataset`, its `output_dir`, its time budget, a new collapse guard and no-signal callback
  (their state and folder are the task's), and the RNGs seeded from `seed` as the trainer's build seeds them, so a
  task gives the same result wherever it comes in the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn


class StartWeights:
    """The start values of a model's restorable parameters, on CPU: `restore` copies them back in place."""

    def __init__(self, model: nn.Module, everything: bool) -> None:
        self.everything = everything
        self.values = {name: p.detach().to("cpu", copy=True) for name, p in self._params(model)}

    def _params(self, model: nn.Module) -> Iterable[tuple[str, nn.Parameter]]:
        return ((n, p) for n, p in model.named_parameters() if self.everything or p.requires_grad)

    def restore(self, model: nn.Module) -> None:
        params = dict(self._params(model))
        if params.keys() != self.values.keys():
            raise RuntimeError("the model's parameters are not the ones saved at the start (names differ)")
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(self.values[name])

    @property
    def numel(self) -> int:
        return sum(v.numel() for v in self.values.values())


def restores_everything(trainer) -> bool:
    """Whether the whole model must be restored: full fine-tuning, or a LoRA whose vLLM sync is TRL's in-place
    merge / unmerge (arc_trl/integrations/lora_merge.py: the base weights rounded at every sync). Else the adapter."""
    from accelerate.utils import is_peft_model

    from arc_trl.integrations.lora_merge import unsupported_lora

    if not is_peft_model(trainer.model):
        return True
    return bool(trainer.use_vllm and unsupported_lora(trainer.model) is not None)


def reset_for_task(trainer, start: StartWeights, train_dataset, output_dir: str, seed: int,
                   task_callbacks: list[Any]) -> None:
    """Make `trainer` a fresh trainer of one task (the module docstring); `task_callbacks` are added for the task
    (remove them with `end_task`)."""
    from transformers import TrainerControl, TrainerState, set_seed
    from transformers.trainer_callback import ExportableState

    from arc_trl.collapse.loop import attach_collapse_guard
    from arc_trl.integrations.trl_internals import seed_colocated_sampling, start_new_run
    from arc_trl.trainer.learning_signal import NoLearningSignalCallback

    trainer.args.output_dir = str(output_dir)
    optimizer = getattr(trainer, "optimizer", None)
    if optimizer is not None:
        optimizer.state.clear()  # the moments freed now (accelerate keeps a reference to the prepared optimizer)
    trainer.optimizer, trainer.lr_scheduler = None, None
    trainer.model.zero_grad(set_to_none=True)
    start.restore(trainer.model)
    start_new_run(trainer)
    trainer.train_dataset = train_dataset
    handler = trainer.callback_handler
    if trainer.collapse_guard is not None:  # its folder is output_dir's, its checkpoints the task's
        handler.remove_callback(trainer.collapse_guard)
        trainer.collapse_guard = attach_collapse_guard(trainer)
    if trainer.no_signal is not None:
        handler.remove_callback(trainer.no_signal)
        trainer.no_signal = NoLearningSignalCallback(trainer.no_signal.steps)
        trainer.add_callback(trainer.no_signal)
    for callback in task_callbacks:
        trainer.add_callback(callback)
    trainer.control = TrainerControl()
    trainer.state = TrainerState(
        is_local_process_zero=trainer.is_local_process_zero(), is_world_process_zero=trainer.is_world_process_zero(),
        stateful_callbacks=[cb for cb in handler.callbacks + [trainer.control] if isinstance(cb, ExportableState)])
    set_seed(seed)  # as GRPOTrainer.__init__ does first; a colocated engine's build then seeds them again, and so
    seed_colocated_sampling(trainer, seed)  # does this (a no-op without one)


def end_task(trainer, task_callbacks: list[Any]) -> None:
    """Remove a task's own callbacks (`reset_for_task`) from `trainer`."""
    for callback in task_callbacks:
        trainer.callback_handler.remove_callback(callback)
