"""A wall-clock budget for a Trainer's `train()`: training ends after the first optimizer step that finishes past
it (the model is then saved as after a normal end; the schedule is not shortened). `arc-trl sft` and `arc-trl train`
(`max_train_seconds`) use it. Under several processes the
ranks stop at the same step: one past the budget stops them all (a rank that stopped alone would leave the others
waiting in a collective)."""

from __future__ import annotations

import time
from collections.abc import Callable

from transformers import TrainerCallback


def any_rank(flag: bool) -> bool:
    """Whether `flag` holds on any process of the default process group (`flag` itself without one)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    value = torch.tensor([int(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


class TimeBudgetCallback(TrainerCallback):
    """Stops training once `seconds` have passed since `train()` began; `stopped_at_step` says where (None: not)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic,
                 agree: Callable[[bool], bool] = any_rank) -> None:
        if not seconds > 0:
            raise ValueError(f"max_train_seconds must be > 0, got {seconds}")
        self.seconds = seconds
        self.clock = clock
        self.agree = agree  # every rank calls it at every step end: the decision is the processes' together
        self.started: float | None = None
        self.stopped_at_step: int | None = None

    def start(self) -> None:
        """Start (or restart) the clock: a caller whose train() calls Trainer.train several times (the collapse
        guard's rollbacks) starts it once, before the first."""
        self.started = self.clock()
        self.stopped_at_step = None

    def on_train_begin(self, args, state, control, **kwargs):
        if self.started is None:
            self.start()

    def on_step_end(self, args, state, control, **kwargs):
        past = self.started is not None and self.clock() - self.started >= self.seconds
        if self.agree(past):
            control.should_training_stop = True
            self.stopped_at_step = state.global_step
        return control
