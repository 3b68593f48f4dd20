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


def _rank(rank: int, port: int, results) -> None:
    """One of two processes: rank 1's clock runs 10x faster, so only it is past the budget at step 2."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        now = [0.0]
        budget = TimeBudgetCallback(10.0, clock=lambda: now[0])
        state, control = TrainerState(), TrainerControl()
        budget.on_train_begin(None, state, control)
        for step in range(1, 6):
            now[0], state.global_step = step * (6.0 if rank == 1 else 0.6), step
            budget.on_step_end(None, state, control)
            if control.should_training_stop:
                break
        results.put((rank, budget.stopped_at_step))
    finally:
        dist.destroy_process_group()


def test_ranks_stop_at_the_same_step_when_one_is_past_the_budget():
    """Under `accelerate launch` each rank has its own clock: a rank that stopped alone would leave the others in a
    collective for ever. Two gloo processes; rank 1 is past the budget at step 2 (12 s), rank 0 not (1.2 s)."""
    import multiprocessing
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [context.Process(target=_rank, args=(rank, port, results)) for rank in (0, 1)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        p.kill()
    assert not alive, "a rank hung: the ranks disagreed on the stop"
    assert sorted(results.get(timeout=5) for _ in processes) == [(0, 2), (1, 2)]


def test_one_clock_for_several_train_calls_once_started():
    """arc-trl train starts the clock once per train(); the collapse guard's rollbacks call Trainer.train again
    (on_train_begin again): the budget keeps counting from the first start, and start() restarts it."""
    now = [0.0]
    budget = TimeBudgetCallback(10.0, clock=lambda: now[0])
    state, control = TrainerState(), TrainerControl()
    budget.start()
    now[0] = 8.0
    budget.on_train_begin(None, state, control)  # a rollback's Trainer.train: not a new budget
    now[0], state.global_step = 10.5, 3
    budget.on_step_end(None, state, control)
    assert control.should_training_stop and budget.stopped_at_step == 3
    budget.start()  # the next train() call: a fresh budget
    assert budget.stopped_at_step is None and budget.started == 10.5
