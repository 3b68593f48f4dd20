"""`TimeBudgetCallback` (`arc-trl sft --max_train_seconds`): training stops at the first step that ends past the
budget, never before it."""

import pytest
from transformers import TrainerControl, TrainerState

from arc_trl.trainer.time_budget import TimeBudgetCallback


def test_stops_at_the_first_step_past_the_budget():
    now = [100.0]
    budget = TimeBudgetCallback(10.0, clock=lambda: now[0])
    state, control = TrainerState(), TrainerControl()
    budget.on_train_begin(None, state, control)
    for step, t in enumerate((103.0, 109.9, 110.0, 120.0), start=1):
        now[0], state.global_step = t, step
        budget.on_step_end(None, state, control)
        if step < 3:  # 3.0 s and 9.9 s in: within the budget
            assert not control.should_training_stop and budget.stopped_at_step is None
        if step == 3:  # 10.0 s in: the budget is spent
            assert control.should_training_stop and budget.stopped_at_step == 3
            break


def test_a_budget_that_cannot_be_kept_is_refused():
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="max_train_seconds must be > 0"):
            TimeBudgetCallback(bad)
