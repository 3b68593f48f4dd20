"""`async_rollouts: 1` through a whole tiny training run on CPU, in server mode against the stand-in vLLM server.

The trainer is built as `arc-trl train` builds it, with `use_vllm: true, vllm_mode: server`; only TRL's
`VLLMGeneration` is replaced (its `__init__` would open an NCCL group to the server): the rollout's requests go over
real HTTP to `tests/fake_vllm_server.py`, and the weight push (`vllm_generation.sync_weights`, which TRL calls once per
step) is recorded instead of sent. One ordered event log holds every completion request (by task), every push (with
the server's requests in flight and the background rollout's state at that moment), every batch trained (its rows
and the policy version of its episodes) and every optimizer step. One prompt per step, each step a different task, in
the dataset's order (`shuffle_dataset: false`), one turn per episode.
"""

from __future__ import annotations

import threading

import pytest
from async_harness import FakeVLLMGeneration, build_trainer, record_trained, reply_ids, rollout_in_flight
from fake_vllm_server import FakeVllmServer
from transformers import TrainerCallback

pytest.importorskip("vllm")  # TRL's VLLMClient needs vLLM installed

import trl.trainer.grpo_trainer as grpo_trainer  # noqa: E402

TASKS = ("6150a2bd", "67a3c6ac", "68b16354", "74dd1130")
STEPS = 3


class Log:
    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.lock = threading.Lock()
        self.seen: dict[str, threading.Event] = {task: threading.Event() for task in TASKS}  # a request arrived
        self.gates = [threading.Event() for _ in TASKS]  # step t reached its optimizer step

    def add(self, *event) -> None:
        with self.lock:
            self.events.append(event)

    def index(self, *event) -> int:
        return next(i for i, e in enumerate(self.events) if e[: len(event)] == event)

    def of(self, kind: str) -> list[tuple]:
        return [e for e in self.events if e[0] == kind]


class Recorder(TrainerCallback):
    """Optimizer steps into the log. With `wait_for_next`, the overlap is made a matter of order, not of timing: each
    step, having reached its optimizer step, opens its gate, then waits (up to 60 s) for a request of the next step's
    task, and the server holds those requests until that gate opens (`_trainer`'s `on_request`): a request of step
    t+1 is answered only once step t has trained up to its optimizer step, so a trainer that waits for the rollout
    before it trains records a gate that timed out."""

    def __init__(self, log: Log, step_tasks: list[str], wait_for_next: bool) -> None:
        self.log, self.step_tasks, self.wait_for_next = log, step_tasks, wait_for_next

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        step = state.global_step
        self.log.add("pre_optimizer", step)
        self.log.gates[step].set()
        if self.wait_for_next and step + 1 < min(state.max_steps, len(self.step_tasks)):
            self.log.add("waited", step, self.log.seen[self.step_tasks[step + 1]].wait(timeout=60))

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.log.add("optimizer_step", state.global_step)


@pytest.fixture
def log():
    return Log()


@pytest.fixture
def server(tiny_tokenizer, log):
    fake = FakeVllmServer(reply_ids(tiny_tokenizer), engines=1, delay_s=0.05)
    thread = threading.Thread(target=fake.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


def _trainer(tiny_model_dir, out, server, log, monkeypatch, async_rollouts: int, wait_for_next: bool = False,
             scheduling: str = "lockstep", **grpo):
    monkeypatch.setattr(grpo_trainer, "VLLMGeneration", FakeVLLMGeneration)
    trainer, task_of = build_trainer(tiny_model_dir, out, server.url, TASKS, async_rollouts, scheduling,
                                     max_steps=STEPS, **grpo)
    step_tasks = [row["task_id"] for row in trainer.train_dataset]

    def on_request(prompt: list[int]) -> None:
        task = task_of[tuple(prompt)]
        log.add("request", task)
        log.seen[task].set()
        step = step_tasks.index(task)
        if wait_for_next and step > 0:  # held until the step before has reached its optimizer step
            log.add("answered", task, log.gates[step - 1].wait(timeout=60))

    server.on_request = on_request
    trainer.vllm_generation.on_sync = lambda: log.add("push", trainer.state.global_step, server.active,
                                                      rollout_in_flight(trainer))
    record_trained(trainer, log.add)
    trainer.add_callback(Recorder(log, step_tasks, wait_for_next))
    return trainer


def _logged(trainer, key: str) -> list[float]:
    return [entry[key] for entry in trainer.state.log_history if key in entry]


@pytest.mark.parametrize("scheduling", ["lockstep", "per_episode"])
def test_the_next_steps_rollout_plays_while_this_step_trains(tiny_model_dir, tmp_path, server, log, monkeypatch,
                                                             scheduling):
    trainer = _trainer(tiny_model_dir, tmp_path / "run", server, log, monkeypatch, async_rollouts=1,
                       wait_for_next=True, scheduling=scheduling)
    try:
        trainer.train()
    finally:
        trainer.close()
    a, b, c, d = TASKS
    assert log.of("waited") == [("waited", 0, True), ("waited", 1, True)]
    assert log.of("answered") == [("answered", t, True) for t in (b, b, c, c)]  # no gate timed out
    for step, task in ((0, b), (1, c)):  # step t+1's rollout starts after step t's push, before its optimizer step,
        assert log.index("push", step) < log.index("request", task) < log.index("optimizer_step", step)
        assert log.index("pre_optimizer", step) < log.index("answered", task)  # and is in flight while step t trains
    # one push per step, each while nothing is in flight (no request being answered, no background rollout)
    assert log.of("push") == [("push", 0, 0, False), ("push", 1, 0, False), ("push", 2, 0, False)]
    # the rows of each step, in the dataloader's order; step 0 plays its own, then each was sampled one step earlier
    assert log.of("trained") == [("trained", 0, [a, a], [0, 0]), ("trained", 1, [b, b], [0, 0]),
                                 ("trained", 2, [c, c], [1, 1])]
    assert [e[1] for e in log.of("request")] == [a, a, b, b, c, c]  # nothing launched for a step after the last
    assert _logged(trainer, "async/policy_lag") == [0.0, 1.0, 1.0]
    assert _logged(trainer, "async/policy_lag_max") == [0.0, 1.0, 1.0]
    assert _logged(trainer, "async/dropped_rollouts") == [0.0, 0.0, 0.0]
    # the wait: none at step 0 (nothing launched), and a part of each later step's generate phase, which holds it
    waits, generate = _logged(trainer, "async/wait_s"), _logged(trainer, "time/generate")
    assert len(waits) == 3 and waits[0] == 0.0 and all(w <= g for w, g in zip(waits, generate))
    assert trainer.async_rollouts.history == [{"version": 0, "step": 1, "used": True, "reason": None},
                                              {"version": 1, "step": 2, "used": True, "reason": None}]


def test_async_rollouts_0_trains_as_before_step_by_step(tiny_model_dir, tmp_path, server, log, monkeypatch):
    trainer = _trainer(tiny_model_dir, tmp_path / "run", server, log, monkeypatch, async_rollouts=0)
    try:
        trainer.train()
    finally:
        trainer.close()
    a, b, c, d = TASKS
    assert trainer.async_rollouts is None
    assert [e[:2] for e in log.events] == [  # push, the step's own requests, its optimizer step: nothing ahead
        ("push", 0), ("request", a), ("request", a), ("trained", 0), ("pre_optimizer", 0),
        ("optimizer_step", 0),
        ("push", 1), ("request", b), ("request", b), ("trained", 1), ("pre_optimizer", 1),
        ("optimizer_step", 1),
        ("push", 2), ("request", c), ("request", c), ("trained", 2), ("pre_optimizer", 2),
        ("optimizer_step", 2)]
    assert log.of("trained") == [("trained", 0, [a, a], [0, 0]), ("trained", 1, [b, b], [1, 1]),
                                 ("trained", 2, [c, c], [2, 2])]
    assert not any(key.startswith("async/") for entry in trainer.state.log_history for key in entry)


def test_a_new_train_call_discards_the_rollout_in_flight(tiny_model_dir, tmp_path, server, log, monkeypatch):
    """Training stops after step 1 with step 2's rollout in flight (what the collapse guard does before a rollback);
    resuming from checkpoint-2 plays step 2's rows afresh, with the checkpoint's weights."""

    class StopAt2(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2 and not resumed:
                control.should_training_stop = True

    resumed = []
    out = tmp_path / "run"
    trainer = _trainer(tiny_model_dir, out, server, log, monkeypatch, async_rollouts=1, save_strategy="steps",
                       save_steps=1)
    trainer.add_callback(StopAt2())
    try:
        trainer.train()
        assert trainer.state.global_step == 2
        assert trainer.async_rollouts.history[-1] == {"version": 1, "step": 2, "used": False,
                                                      "reason": "train() ends"}
        assert trainer.async_rollouts.dropped == 1 and trainer.async_rollouts.pending is None
        # the drop came after step 1's log: logged then, in an entry of its own at step 2
        assert [e for e in trainer.state.log_history if "async/dropped_rollouts" in e][-1] == {
            "async/dropped_rollouts": 1.0, "epoch": pytest.approx(trainer.state.epoch), "step": 2}
        resumed.append(True)
        log.events.clear()
        trainer.train(resume_from_checkpoint=str(out / "checkpoint-2"))
    finally:
        trainer.close()
    a, b, c, d = TASKS
    assert log.of("push") == [("push", 2, 0, False)]
    assert log.of("trained") == [("trained", 2, [c, c], [2, 2])]  # step 2's rows, sampled by step 2's weights
    assert _logged(trainer, "async/dropped_rollouts")[-1] == 0.0  # logged at the first call's end, not again
    assert _logged(trainer, "async/policy_lag")[-1] == 0.0
    assert trainer.async_rollouts.dropped == 1  # nothing was in flight at the end (step 2 is the last)


def test_a_discarded_rollout_stops_mid_turn_and_leaves_nothing_on_the_server(tiny_model_dir, tmp_path, server, log,
                                                                            monkeypatch):
    """A rollback discards the rollout while its requests are being answered: it ends with `RolloutCancelled` and the
    discard returns only once the server has answered what was sent, so the next weight push meets an idle server."""
    from arc_trl.rollout.detached import DetachedServerGenerator, RolloutCancelled

    trainer = _trainer(tiny_model_dir, tmp_path / "run", server, log, monkeypatch, async_rollouts=1)
    try:
        server.delay_s = 1.0  # each reply takes a second: the discard comes while requests are in flight
        rows = [trainer.train_dataset[0], trainer.train_dataset[0]]
        prompts = [row["prompt"] for row in rows]
        cancel = threading.Event()
        generator = DetachedServerGenerator(trainer, cancel)
        manager = trainer.async_rollouts
        manager.launch(rows, 0, lambda: trainer.rollout.play(rows, prompts, trainer, generator, trainer.sandbox_pool),
                       cancel)
        launched = manager.pending
        assert log.seen[rows[0]["task_id"]].wait(timeout=30)  # a request reached the server
        manager.discard(0, "rollback")
        assert server.active == 0  # what was sent has been answered: nothing of the rollout is on the server
        assert isinstance(launched.future.exception(timeout=0), RolloutCancelled)
        assert manager.history == [{"version": 0, "step": 0, "used": False, "reason": "rollback"}]
    finally:
        trainer.close()


def test_a_server_teacher_scores_background_episodes_as_they_finish(tiny_model_dir, tmp_path, server, log,
                                                                     monkeypatch):
    """A teacher that overlaps generation (a server) gets the background rollout's episodes from its thread as they
    finish, before the step that trains them has pushed its weights, and that step uses those scores (no batched
    call after the rollout). Step 0 plays its own rows, scored from the training thread as before."""
    from concurrent.futures import Future

    trainer = _trainer(tiny_model_dir, tmp_path / "run", server, log, monkeypatch, async_rollouts=1)

    class Used(Future):  # a finished future that logs when the step takes its scores
        def result(self, timeout=None):
            log.add("teacher_result", threading.current_thread().name)
            return super().result(timeout)

    class StandInServerTeacher:
        overlaps_generation = True

        def score(self, sequences, prompt_lengths):
            raise AssertionError("a batched call after the rollout: the scores started as episodes finished unused")

        def submit(self, sequences, prompt_lengths):
            log.add("teacher_submit", threading.current_thread().name, len(sequences))
            future = Used()
            future.set_result([[-1.0] * (len(s) - n) for s, n in zip(sequences, prompt_lengths)])
            return future

    trainer.teacher = StandInServerTeacher()
    trainer.rollout.on_finished = trainer.teacher_term.submit_finished
    try:
        trainer.train()
    finally:
        trainer.close()
    main = threading.main_thread().name
    submits = [(i, e) for i, e in enumerate(log.events) if e[0] == "teacher_submit"]
    assert sum(e[2] for _, e in submits) == 2 * STEPS  # every episode of the 3 steps scored once, through submit
    pushes = [log.index("push", step) for step in range(STEPS)]
    on_main = [i for i, e in submits if e[1] == main]
    assert on_main and all(i < pushes[1] for i in on_main)  # step 0's own rows, from the training thread
    background = [i for i, e in submits if e[1].startswith("arc-async-rollout")]
    assert len(on_main) + len(background) == len(submits)
    for step in (1, 2):  # step t's rows: from the background thread, after step t-1's push and before step t's
        assert any(pushes[step - 1] < i < pushes[step] for i in background)
    assert [e[1] for e in log.of("teacher_result")] == [main] * len(submits)  # each used by the training step
