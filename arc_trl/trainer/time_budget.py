"""A wall-clock budget for a Trainer's `train()`: training ends after the first optimizer step that finishes past
it (the model is then saved as after a normal end; the schedule is not shortened)."""

from __future__ import annotations

import time
from collections.abc import Callable

from transformers import TrainerCallback


class TimeBudgetCallback(TrainerCallback):
    """Stops training once `seconds` have passed since `train()` began; `stopped_at_step` says where (None: not)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not seconds > 0:
            raise ValueError(f"max_train_seconds must be > 0, got {seconds}")
        self.seconds = seconds
        self.clock = clock
        self.started: float | None = None
        self.stopped_at_step: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = self.clock()

    def on_step_end(self, args, state, control, **kwargs):
        if self.started is not None and self.clock() - self.started >= self.seconds:
            control.should_training_stop = True
            self.stopped_at_step = state.global_step
        return control
