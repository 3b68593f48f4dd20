"""`async_rollouts: 1` with two trainer processes (gloo, CPU) against the stand-in vLLM server.

Each process runs tests/async_rollouts_worker.py (the trainer of tests/async_harness.py), started here with the
environment torchrun gives its workers (so that a hung run can be killed whole); the servers run here, in
the test's process, and keep one ordered log of both processes' requests (mapped to the process and step whose rows
they belong to), weight pushes, rollouts played and optimizer steps. Two processes, two rows per process and step
(one prompt, 2 generations): step s trains `TASKS[2s]` on process 0 and `TASKS[2s + 1]` on process 1, 3 steps of an
epoch of 4. The push is held by the server until every process has entered its weight sync, and then for `PUSH_S`
more: a process that sent its step's requests without waiting for the main process's push is seen doing so.
The whole run is bounded (`RUN_TIMEOUT_S`, every held request or push `HOLD_S`, every collective
`COLLECTIVE_TIMEOUT_S`): a deadlock fails the test, it does not hang it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from async_harness import reply_ids
from async_rollouts_worker import STEPS, TASKS
from fake_vllm_server import FakeVllmServer

pytest.importorskip("vllm")  # TRL's VLLMClient needs vLLM installed

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 2
HOLD_S = 30.0
PUSH_S = 1.0  # how long a push lasts once every process is in its weight sync (requests during it are seen)
RUN_TIMEOUT_S = 400


def rows(rank: int, step: int) -> list[str]:
    return [TASKS[PROCESSES * step + rank]] * 2


class Events:
    """An ordered log of events (tuples, their kind first)."""

    def __init__(self, events: list[tuple] | None = None) -> None:
        self.events = events if events is not None else []

    def index(self, *event) -> int:
        return next(i for i, e in enumerate(self.events) if e[: len(event)] == event)

    def indices(self, *event) -> list[int]:
        return [i for i, e in enumerate(self.events) if e[: len(event)] == event]

    def of(self, kind: str) -> list[tuple]:
        return [e for e in self.events if e[0] == kind]


class Coordinator(Events):
    """A stand-in server's log of both processes, its held requests (`hold`) and held pushes."""

    def __init__(self, server: FakeVllmServer, hold: bool) -> None:
        super().__init__()
        self.server, self.hold = server, hold
        self.lock = threading.Lock()
        self.task_of: dict[tuple[int, ...], str] = {}
        keys = [(rank, step) for rank in range(PROCESSES) for step in range(len(TASKS) // PROCESSES)]
        self.seen = {key: threading.Event() for key in keys}  # a request of (process, step)'s rows arrived
        self.gates = {key: threading.Event() for key in keys}  # (process, step) reached its optimizer step
        self.synced: Counter = Counter()  # step -> processes in their weight sync
        self.synced_change = threading.Condition()
        server.on_request, server.on_post = self.on_request, self.on_post

    def add(self, *event) -> None:
        with self.lock:
            self.events.append(event)

    def on_request(self, prompt: list[int]) -> None:
        index = TASKS.index(self.task_of[tuple(prompt)])
        rank, step = index % PROCESSES, index // PROCESSES
        self.add("request", rank, step)
        self.seen[(rank, step)].set()
        if self.hold and step > 0:  # held until the process's step before has reached its optimizer step
            self.add("answered", rank, step, self.gates[(rank, step - 1)].wait(timeout=HOLD_S))

    def on_post(self, path: str, body: dict) -> dict | None:
        kind, rank, step = body["kind"], body["rank"], body.get("step")
        if kind == "prompts":
            with self.lock:
                self.task_of.update({tuple(ids): task for ids, task in body["prompts"]})
        elif kind == "wait":
            return {"seen": self.seen[(rank, step)].wait(timeout=HOLD_S)}
        elif kind == "sync":
            self.add("sync", rank, step)
            with self.synced_change:
                self.synced[step] += 1
                self.synced_change.notify_all()
        elif kind == "push":
            with self.synced_change:
                everyone = self.synced_change.wait_for(lambda: self.synced[step] == PROCESSES, timeout=HOLD_S)
            self.add("push", rank, step, self.server.active, everyone)
            time.sleep(PUSH_S)
            self.add("pushed", step, self.server.active)
        elif kind == "played":
            self.add("played", rank, body["tasks"], body["thread"])
        else:  # pre_optimizer, optimizer_step, resume
            self.add(kind, rank, step)
            if kind == "pre_optimizer":
                self.gates[(rank, step)].set()
        return {}


def _serve(tokenizer) -> FakeVllmServer:
    server = FakeVllmServer(reply_ids(tokenizer), engines=1, delay_s=0.05)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_workers(args: list[str], out: Path) -> None:
    """The worker on 2 processes (torchrun's environment: RANK, WORLD_SIZE, MASTER_*), each in its own session with
    its children (the sandboxes): when one fails the other is killed, and both after `RUN_TIMEOUT_S`."""
    base = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}", "OMP_NUM_THREADS": "1",
            "WORLD_SIZE": str(PROCESSES), "LOCAL_WORLD_SIZE": str(PROCESSES), "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(_free_port())}
    procs = []
    for rank in range(PROCESSES):
        with open(out / f"rank{rank}.log", "w") as log:
            procs.append(subprocess.Popen(
                [sys.executable, str(ROOT / "tests" / "async_rollouts_worker.py"), *args], stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                env={**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}))
    deadline, timed_out = time.monotonic() + RUN_TIMEOUT_S, False
    try:
        while True:
            codes = [proc.poll() for proc in procs]
            if all(code == 0 for code in codes) or any(code not in (None, 0) for code in codes):
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.2)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    codes = [proc.returncode for proc in procs]
    logs = "\n".join(f"--- rank {rank}\n" + (out / f"rank{rank}.log").read_text()[-4000:] for rank in range(PROCESSES))
    assert not timed_out, f"the two processes did not finish within {RUN_TIMEOUT_S} s (a deadlock?)\n{logs}"
    assert codes == [0] * PROCESSES, f"exit codes {codes}\n{logs}"


def _check_pushes(log: Events, steps: list[int]) -> None:
    """One push per step, from the main process, once every process is in its weight sync, with no request in flight
    at its start nor arriving while it lasts."""
    assert log.of("push") == [("push", 0, step, 0, True) for step in steps]
    assert log.of("pushed") == [("pushed", step, 0) for step in steps]
    assert Counter(e[1:] for e in log.of("sync")) == {(rank, step): 1 for rank in range(PROCESSES) for step in steps}
    for step in steps:
        start, end = log.index("push", 0, step), log.index("pushed", step)
        assert not [e for e in log.events[start:end] if e[0] == "request"], (step, log.events[start:end])


def test_two_processes_each_play_their_own_rows_in_the_background(tiny_model_dir, tiny_tokenizer, tmp_path):
    """Per-episode scheduling, whose rollout makes no collective call (each process its own requests through its own
    client): nothing but the trainer keeps the two processes in step. The main process pushed alone, and process 1
    sent the first step of each `train()` call (played on the training thread) during that push, before the fix
    (`rollout.generators.wait_for_the_push`)."""
    overlap_server, resume_server = _serve(tiny_tokenizer), _serve(tiny_tokenizer)
    overlap, resume = Coordinator(overlap_server, hold=True), Coordinator(resume_server, hold=False)
    try:
        _run_workers([str(tiny_model_dir), str(tmp_path), "per_episode", overlap_server.url, resume_server.url],
                     tmp_path)
    finally:
        for name, server, log in (("overlap", overlap_server, overlap), ("resume", resume_server, resume)):
            server.shutdown()
            server.server_close()
            (tmp_path / f"events_{name}.json").write_text(json.dumps(log.events))  # to read when it fails
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(PROCESSES)]
    _check_overlap(overlap, [result["overlap"] for result in ranks])
    _check_resume(resume, [result["resume"] for result in ranks])


def _check_overlap(log: Events, ranks: list[dict]) -> None:
    """3 steps, each process playing the next step's rows in the background while this step trains."""
    steps = list(range(STEPS))
    _check_pushes(log, steps)
    # each process's requests are its own rows' (2 per step), none for step 3 (max_steps: nothing launched after
    # the last step)
    assert Counter(e[1:] for e in log.of("request")) == {(rank, step): 2 for rank in range(PROCESSES) for step in steps}
    for rank, run in enumerate(ranks):
        local = run["local"]
        # the rows each process trains are its dataloader's, in order; step 0 plays its own (lag 0), then each step's
        # were sampled one step earlier, by this process's background rollout
        assert [e for e in local if e[0] == "trained"] == [
            ["trained", 0, rows(rank, 0), [0, 0]], ["trained", 1, rows(rank, 1), [0, 0]],
            ["trained", 2, rows(rank, 2), [1, 1]]]
        assert [e[2:] for e in log.of("played") if e[1] == rank] == [
            (rows(rank, 0), "MainThread"), (rows(rank, 1), "arc-async-rollout"),
            (rows(rank, 2), "arc-async-rollout")]
        assert [e for e in local if e[0] == "sync"] == [["sync", step, False] for step in steps]  # nothing in flight
        assert [e for e in local if e[0] == "waited"] == [["waited", 0, True], ["waited", 1, True]]
        assert run["logged"]["async/policy_lag"] == [0.0, 1.0, 1.0]
        assert run["logged"]["async/policy_lag_max"] == [0.0, 1.0, 1.0]
        assert run["logged"]["async/dropped_rollouts"] == [0.0, 0.0, 0.0]
        waits = run["logged"]["async/wait_s"]
        assert len(waits) == STEPS and waits[0] == 0.0 and min(waits) >= 0.0  # step 0 takes nothing
        assert run["history"] == [{"version": 0, "step": 1, "used": True, "reason": None},
                                  {"version": 1, "step": 2, "used": True, "reason": None}]
        assert (run["dropped"], run["pending"], run["global_step"]) == (0, False, STEPS)  # nothing left in flight
        # step 0's rows are played after step 0's push; step s's (s >= 1) between the pushes of steps s-1 and s
        requests = [log.indices("request", rank, step) for step in steps]
        assert log.index("pushed", 0) < min(requests[0])
        for step in (1, 2):
            assert log.index("pushed", step - 1) < min(requests[step])
            assert max(requests[step]) < log.index("played", rank, rows(rank, step)) < log.index("push", 0, step)
        # the overlap: step s+1's requests arrive before step s's optimizer step, and are answered only once step s
        # has reached it (a process that waited for its rollout before training would time out here)
        for step in (0, 1):
            assert min(requests[step + 1]) < log.index("optimizer_step", rank, step)
            answered = log.indices("answered", rank, step + 1)
            assert [log.events[i][3] for i in answered] == [True, True]
            assert log.index("pre_optimizer", rank, step) < min(answered)


def _check_resume(log: Events, ranks: list[dict]) -> None:
    """Stopped after step 1 with step 2's rollout in flight, then resumed from checkpoint-2."""
    mark = max(log.indices("resume", 0) + log.indices("resume", 1))
    before, after = Events(log.events[:mark]), Events(log.events[mark + 1:])
    assert [e[0] for e in log.events[mark - 1: mark + 1]] == ["resume", "resume"]
    _check_pushes(before, [0, 1])
    _check_pushes(after, [2])  # the resumed step's push: the checkpoint's weights
    assert Counter(e[1:] for e in after.of("request")) == {(0, 2): 2, (1, 2): 2}
    for rank, run in enumerate(ranks):
        first, resumed = run["first"], run["resumed"]
        assert [e for e in first["local"] if e[0] == "trained"] == [
            ["trained", 0, rows(rank, 0), [0, 0]], ["trained", 1, rows(rank, 1), [0, 0]]]
        assert first["global_step"] == 2 and first["pending"] is False and first["dropped"] == 1
        assert first["history"][-1] == {"version": 1, "step": 2, "used": False, "reason": "train() ends"}
        # step 2's rows played afresh, on the training thread, after the push of the checkpoint's weights
        assert [e[2:] for e in after.of("played") if e[1] == rank] == [(rows(rank, 2), "MainThread")]
        assert after.index("pushed", 2) < min(after.indices("request", rank, 2))
        assert resumed["local"] == [["sync", 2, False], ["trained", 2, rows(rank, 2), [2, 2]]]
        # the discard, logged at the end of the first call (an entry of its own at step 2), not again when resumed
        assert first["logged"]["async/dropped_rollouts"] == [0.0, 0.0, 1.0]
        assert resumed["logged"]["async/dropped_rollouts"] == [0.0, 0.0, 0.0]
        assert resumed["logged"]["async/policy_lag"] == [0.0, 1.0, 0.0]
        assert (resumed["dropped"], resumed["pending"], resumed["global_step"]) == (1, False, STEPS)
