"""`async_rollouts: 1` bookkeeping on hand-made rollouts (arc_trl/trainer/async_rollout.py): the policy version and
lag of what is taken, what is dropped and counted, discarding, failures, the one-step read-ahead, and the config
keys that are refused. The trainer-level run (overlap, weight pushes, rollback) is
tests/integration/test_async_rollouts.py."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from arc_trl.config import ArcConfig
from arc_trl.data.task import ArcTask, Pair
from arc_trl.rollout.episode import Episode
from arc_trl.trainer.async_rollout import AsyncRollouts, StepLookahead

TASK = ArcTask(id="t", train=[Pair([[1]], [[1]])], test_inputs=[[[1]]], test_outputs=[[[1]]])


def _episodes(n: int = 2) -> list[Episode]:
    return [Episode(task=TASK, prompt_ids=[1, 2], index=i) for i in range(n)]


def _launch(manager: AsyncRollouts, rows, version: int, play=None) -> threading.Event:
    cancel = threading.Event()
    manager.launch(rows, version, play or (lambda: _episodes()), cancel)
    return cancel


def test_a_taken_rollout_carries_the_version_that_sampled_it_and_its_lag():
    manager = AsyncRollouts(max_lag=1)
    rows = [{"prompt": "a"}]
    first, metrics = manager.take(rows, 0)  # nothing launched: the step plays its rows itself, lag 0
    assert first is None and metrics == {"async/policy_lag": 0.0, "async/policy_lag_max": 0.0,
                                         "async/dropped_rollouts": 0.0, "async/wait_s": 0.0}
    _launch(manager, rows, version=0)
    episodes, metrics = manager.take(rows, 1)
    assert [ep.policy_version for ep in episodes] == [0, 0]
    assert (metrics["async/policy_lag"], metrics["async/policy_lag_max"], metrics["async/dropped_rollouts"]) == (
        1.0, 1.0, 0.0)
    assert metrics["async/wait_s"] >= 0.0
    assert manager.history == [{"version": 0, "step": 1, "used": True, "reason": None}]
    assert manager.pending is None


def test_wait_s_is_the_time_the_step_waited_for_its_rollout():
    """The figure the docs' analysis of the asynchronous step stands on (docs/async.md): the seconds `take` blocked
    for a rollout still playing, and 0 (within the clock's resolution) for one that had ended."""
    manager = AsyncRollouts(max_lag=1)
    rows = [{"prompt": "a"}]
    release = threading.Event()
    _launch(manager, rows, 0, lambda: release.wait(10) and _episodes())
    threading.Timer(0.4, release.set).start()
    episodes, metrics = manager.take(rows, 1)  # blocks until the rollout ends, ~0.4 s after launch
    assert episodes is not None and 0.35 <= metrics["async/wait_s"] < 0.4 + 0.3
    _launch(manager, rows, 1)
    manager.settle()  # it has ended before the step takes it
    episodes, metrics = manager.take(rows, 2)
    assert episodes is not None and metrics["async/wait_s"] < 0.01


def test_a_drop_at_the_end_of_a_train_call_is_logged_then():
    """The discard at the end of `train()` comes after the last step's log: it is logged at once, by itself."""
    logged: list[dict] = []
    manager = AsyncRollouts(max_lag=1, log_drops=logged.append)
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=2))
    with manager.attempt(trainer):
        _launch(manager, [{"prompt": "a"}], 2)  # the next step's rollout, in flight when training stops
    assert logged == [{"async/dropped_rollouts": 1.0}] and manager.dropped == 1
    assert manager.take([{"prompt": "b"}], 3)[1]["async/dropped_rollouts"] == 0.0  # logged once, not again
    with manager.attempt(trainer):
        pass
    assert logged == [{"async/dropped_rollouts": 1.0}]  # nothing new dropped: nothing logged


def test_a_rollout_older_than_the_lag_or_for_other_rows_is_dropped_and_counted():
    manager = AsyncRollouts(max_lag=1)
    rows, other = [{"prompt": "a"}], [{"prompt": "a"}]  # equal, but not the batch it was launched for
    _launch(manager, rows, version=3)
    episodes, metrics = manager.take(rows, 5)
    assert episodes is None and metrics["async/dropped_rollouts"] == 1.0  # lag 2 > 1
    _launch(manager, rows, version=5)
    episodes, metrics = manager.take(other, 6)
    assert episodes is None and metrics["async/dropped_rollouts"] == 1.0  # each step logs its own drops
    _launch(manager, rows, version=7)
    assert manager.take(rows, 6)[0] is None  # a version ahead of the step (a rollback went back): lag -1
    assert [(h["version"], h["step"], h["used"], h["reason"]) for h in manager.history] == [
        (3, 5, False, "stale"), (5, 6, False, "rows"), (7, 6, False, "stale")]
    assert manager.dropped == 3


def test_when_another_process_cannot_use_its_rollout_no_process_does():
    manager = AsyncRollouts(max_lag=1, agree=lambda usable, failed: (False, failed))
    rows = [{"prompt": "a"}]
    _launch(manager, rows, version=0)
    assert manager.take(rows, 1)[0] is None
    assert manager.history == [{"version": 0, "step": 1, "used": False, "reason": "another process"}]


def test_a_failed_rollout_raises_on_every_process():
    manager = AsyncRollouts(max_lag=1)
    rows = [{"prompt": "a"}]

    def fail():
        raise ValueError("server gone")

    _launch(manager, rows, 0, fail)
    with pytest.raises(ValueError, match="server gone"):
        manager.take(rows, 1)
    assert manager.history == [{"version": 0, "step": 1, "used": False, "reason": "failed"}]
    other = AsyncRollouts(max_lag=1, agree=lambda usable, failed: (False, True))  # this process's rollout was fine
    _launch(other, rows, 0)
    with pytest.raises(RuntimeError, match="failed on another process"):
        other.take(rows, 1)


def test_launch_returns_while_the_rollout_plays_and_discard_cancels_it():
    manager = AsyncRollouts(max_lag=1)
    started, cancel, seen_cancel = threading.Event(), threading.Event(), []

    def play():
        started.set()
        seen_cancel.append(cancel.wait(timeout=30))  # plays until discarded
        return _episodes()

    manager.launch([{"prompt": "a"}], 0, play, cancel)
    assert started.wait(timeout=30)  # running on the background thread; launch has returned
    assert manager.pending is not None and not manager.pending.future.done()
    manager.discard(1, "rollback")
    assert seen_cancel == [True] and manager.pending is None
    assert manager.history == [{"version": 0, "step": 1, "used": False, "reason": "rollback"}]
    second = threading.Event()
    manager.launch([{"prompt": "b"}], 1, lambda: second.wait(30) and _episodes(), second)
    with pytest.raises(RuntimeError, match="in flight"):  # one rollout at a time
        _launch(manager, [{"prompt": "c"}], 1)
    manager.close()  # cancels (sets `second`) and waits
    assert manager.dropped == 2 and manager.history[-1]["reason"] == "closed"


def test_settle_waits_and_keeps_the_rollout_to_be_taken():
    manager = AsyncRollouts(max_lag=1)
    go = threading.Event()
    rows = [{"prompt": "a"}]
    _launch(manager, rows, 0, lambda: go.wait(30) and _episodes())
    threading.Timer(0.05, go.set).start()
    manager.settle()
    assert manager.pending is not None and manager.pending.future.done()
    assert len(manager.take(rows, 1)[0]) == 2 and manager.dropped == 0


def test_attempt_discards_what_is_in_flight_at_both_ends():
    manager = AsyncRollouts(max_lag=1)
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=4))
    _launch(manager, [{"prompt": "a"}], 3)
    with manager.attempt(trainer):
        assert manager.pending is None
        _launch(manager, [{"prompt": "b"}], 4)
    assert manager.pending is None
    assert [(h["version"], h["reason"]) for h in manager.history] == [(3, "train() starts"), (4, "train() ends")]


def test_a_failed_training_call_does_not_hang_on_a_rollout_that_will_not_stop():
    """A server that stopped answering keeps the background rollout in its request: the error that ended training
    must come out after the bounded wait, not hang behind it."""
    manager = AsyncRollouts(max_lag=1)
    manager.failure_timeout_s = 0.2
    release = threading.Event()  # the rollout ignores its cancel event, as a request blocked in the HTTP client
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=1))
    with pytest.raises(KeyError, match="the training error"), manager.attempt(trainer):
        _launch(manager, [{"prompt": "b"}], 1, lambda: release.wait(60) and _episodes())
        raise KeyError("the training error")
    assert [h["reason"] for h in manager.history] == ["train() failed"]
    assert not manager.pending and not release.is_set()  # it came out while the rollout still hung
    release.set()
    manager.thread.join(timeout=10)


def test_the_evaluation_waits_for_every_process_rollout_before_it_plays():
    """The ARC evaluation may push weights at its first request without a collective before it: every process must
    have settled its background rollout first (a barrier after settle), or one process pushes under another's."""
    from arc_trl.eval.callback import ArcEvalCallback

    events = []

    class Stop(Exception):
        pass

    def barrier():
        events.append("barrier")
        raise Stop  # the evaluation proper is not under test

    callback = ArcEvalCallback.__new__(ArcEvalCallback)
    callback.trainer = SimpleNamespace(async_rollouts=SimpleNamespace(settle=lambda: events.append("settle")),
                                       accelerator=SimpleNamespace(wait_for_everyone=barrier))
    with pytest.raises(Stop):
        callback.evaluate()
    assert events == ["settle", "barrier"]


def test_lookahead_returns_each_steps_batches_in_order_and_keeps_the_next():
    steps = [[f"r{i}"] * 2 for i in range(3)]  # each step: 2 micro-step batches of the same rows
    flat = iter([batch for step in steps for batch in step])
    calls = []

    def fetch():
        calls.append(1)
        got = []
        for _ in range(2):
            try:
                got.append(next(flat))
            except StopIteration:
                break
        return got, None

    lookahead = StepLookahead()
    seen = []
    for _ in range(3):
        batches, _ = lookahead.batches(flat, fetch)
        seen.append((batches, lookahead.next_rows()))
    assert seen == [(["r0", "r0"], "r1"), (["r1", "r1"], "r2"), (["r2", "r2"], None)]
    assert len(calls) == 4  # the first step's, then one step ahead each time (the last finds the epoch's end)
    fresh = iter([["s0"], ["s1"]])
    assert lookahead.batches(fresh, lambda: ([next(fresh)], None))[0] == [["s0"]]  # a new iterator starts anew


def _args(**overrides):
    values = dict(use_vllm=True, vllm_mode="server", num_iterations=1, steps_per_generation=None,
                  gradient_accumulation_steps=2, vllm_importance_sampling_correction=True, loss_type="dapo",
                  off_policy_mask_threshold=None)
    return SimpleNamespace(**{**values, **overrides})


@pytest.mark.parametrize(("overrides", "needs"), [
    ({"vllm_mode": "colocate"}, "vllm_mode: server"),
    ({"use_vllm": False}, "use_vllm: true"),
    ({"num_iterations": 2}, "num_iterations: 1"),
    ({"steps_per_generation": 1}, "steps_per_generation = gradient_accumulation_steps"),
    ({"vllm_importance_sampling_correction": False}, "vllm_importance_sampling_correction: true"),
    ({"vllm_structured_outputs_regex": "\\d+"}, "no vllm_structured_outputs_regex"),
    ({"eval_strategy": "steps"}, "eval_strategy: no"),
])
def test_async_rollouts_refuses_what_it_does_not_support_naming_the_keys(overrides, needs):
    ArcConfig(async_rollouts=1).check_with(_args())  # the supported setting
    ArcConfig(async_rollouts=0).check_with(_args(**overrides))  # synchronous: nothing to refuse
    with pytest.raises(ValueError, match="async_rollouts: 1 needs") as error:
        ArcConfig(async_rollouts=1).check_with(_args(**overrides))
    assert needs in str(error.value)


def test_async_rollouts_above_one_is_refused():
    assert ArcConfig().async_rollouts == 0  # synchronous by default
    with pytest.raises(ValueError, match="async_rollouts=2 is not 0"):
        ArcConfig(async_rollouts=2)


@pytest.mark.parametrize(("async_rollouts", "confirm"), [(0, 1), (1, 2)])
def test_the_collapse_guard_confirms_a_checkpoint_when_its_episodes_are_trained(async_rollouts, confirm, tmp_path):
    """A checkpoint's weights sample the episodes of the next step, trained one step later with async_rollouts: 1."""
    from arc_trl.collapse.loop import attach_collapse_guard

    trainer = SimpleNamespace(
        arc_config=ArcConfig(async_rollouts=async_rollouts, collapse_guard="rollback"),
        args=SimpleNamespace(output_dir=str(tmp_path), steps_per_generation=1, gradient_accumulation_steps=1,
                             num_iterations=1),
        accelerator=SimpleNamespace(is_main_process=True), callback_handler=SimpleNamespace(callbacks=[]))
    assert attach_collapse_guard(trainer).confirm_steps == confirm
