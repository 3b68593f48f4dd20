"""Sandbox behaviour on well-meaning code: persistence, preloaded variables, SUBMIT, turns, program mode, pools."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from arc_trl.data.task import ArcTask, Pair, grid_problem
from arc_trl.sandbox import (
    ExecResult,
    ProgramResult,
    SandboxConfig,
    SandboxPool,
    TurnResult,
    extract_code_blocks,
    extract_program,
    replay_attempt,
)
from arc_trl.sandbox.child import grids as child_grids

# 1 s of CPU per run; the wall-clock backstop is set far away so that a busy test machine cannot reach it
FAST = SandboxConfig(timeout_s=1.0, wall_timeout_s=30.0, kill_grace_s=0.5, memory_mb=512, max_output_chars=2000)


def mirror_task() -> ArcTask:
    return ArcTask("mirror", [Pair([[1, 2], [3, 4]], [[2, 1], [4, 3]]), Pair([[5, 0, 6]], [[6, 0, 5]])],
                   [[[7, 8], [9, 0]]], [[[8, 7], [0, 9]]])


def two_test_task() -> ArcTask:
    # test outputs use a distinctive pattern so a test can look for it inside the child
    return ArcTask("two", [Pair([[1, 0], [0, 1]], [[1, 0], [0, 1]])], [[[2, 2], [2, 0]], [[3]]],
                   [[[9, 8, 7, 6, 5, 4, 3, 2, 1]], [[4, 7, 4, 7, 4, 7, 4]]])


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(num_workers=2, config=FAST) as p:
        yield p


@pytest.fixture
def session(pool):
    with pool.new_session(mirror_task()) as s:
        yield s


def test_state_persists_across_calls(session):
    assert session.run("x = 20\ndef double(v):\n    return 2 * v").status == "ok"
    r = session.run("import math\nprint(double(x) + 2, math.pi > 3)")
    assert (r.status, r.stdout) == ("ok", "42 True\n")
    assert r.restarted is False and r.error_kind is None and r.seconds < 1.0


def test_preloaded_variables(session):
    code = textwrap.dedent("""
        print(np.__name__, len(train_inputs), len(train_outputs), len(test_inputs))
        print(type(train_inputs[0]).__name__, train_inputs[0].dtype.kind)
        print(train_inputs[1].tolist(), train_outputs[1].tolist(), test_inputs[0].tolist())
        print('test_outputs' in globals(), callable(SUBMIT))
    """)
    r = session.run(code)
    assert r.status == "ok", r.stderr
    assert r.stdout.splitlines() == ["numpy 2 2 1", "ndarray i", "[[5, 0, 6]] [[6, 0, 5]] [[7, 8], [9, 0]]",
                                     "False True"]


def test_test_outputs_never_reach_the_child(pool):
    task = two_test_task()
    with pool.new_session(task) as s:
        assert "9, 8, 7, 6, 5" not in json.dumps(s._setup) and "4, 7, 4, 7" not in json.dumps(s._setup)
        # and no list in the child's heap holds them (the needles are strings, so they do not match themselves)
        code = textwrap.dedent("""
            import gc
            needles = {"9,8,7,6,5,4,3,2,1", "4,7,4,7,4,7,4", "2,0"}
            rows = [o for o in gc.get_objects() if type(o) is list and 0 < len(o) < 10
                    and all(type(v) is int for v in o)]
            print(sorted({",".join(map(str, o)) for o in rows} & needles))
        """)
        r = s.run(code)
        assert (r.status, r.stdout) == ("ok", "['2,0']\n")  # a test input row is found (control), outputs are not


def test_mutating_preloaded_inputs_does_not_change_transform_inputs(session):
    session.run("train_inputs[0][0, 0] = 9\ndef transform(g):\n    return g.tolist()")
    p = session.apply_transform()
    assert p.train_outputs[0] == [[1, 2], [3, 4]]


def test_submit_valid_records_grids_and_stops_the_block(session):
    r = session.run("print('before')\nSUBMIT(np.array([[8, 7], [0, 9]]))\nprint('after')")
    assert r.status == "ok" and r.stdout == "before\n"
    assert r.submitted == [[[8, 7], [0, 9]]] and r.submit_error is None
    assert session.submitted == [[[8, 7], [0, 9]]]


def test_submit_accepts_a_list_of_one_grid(session):
    assert session.run("SUBMIT([[[1]]])").submitted == [[[1]]]


@pytest.mark.parametrize(
    "call, message",
    [
        ("SUBMIT([[[1]]])", "expected 2 grids (one per test input), got 1"),
        ("SUBMIT([[[1, 2], [3]], [[1]]])", "grid 0: grid is not rectangular (row 0 has 2 cells, row 1 has 1)"),
        ("SUBMIT([[[1]], [[10]]])", "grid 1: cell (0,0) has colour 10 outside 0..9"),
        ("SUBMIT([np.zeros((2, 2)), [[1]]])", "grid 0: array has dtype float64"),
        ("SUBMIT([[[1.0]], [[1]]])", "grid 0: cell (0,0) is 1.0, not an integer colour"),
        ("SUBMIT([[[True]], [[1]]])", "grid 0: cell (0,0) is True, not an integer colour"),
        ("SUBMIT([np.zeros((31, 1), dtype=int), [[1]]])", "grid 0: grid is 31x1 (max 30x30)"),
        ("SUBMIT([[], [[1]]])", "grid 0: a grid must be a non-empty list of rows"),
        ("SUBMIT('abc')", "expected a list of 2 grid(s)"),
    ],
)
def test_submit_malformed_is_rejected_with_a_clear_message(pool, call, message):
    with pool.new_session(two_test_task()) as s:
        r = s.run(call)
        assert r.status == "error" and r.error_kind == "SubmitError"
        assert r.submitted is None and r.submit_error.startswith("SUBMIT rejected: ") and message in r.submit_error
        assert f"SubmitError: SUBMIT rejected: {message}" in r.stderr
        assert s.submitted is None
        ok = s.run("SUBMIT([[[2, 2], [2, 0]], [[3]]])")  # the episode goes on
        assert ok.submitted == [[[2, 2], [2, 0]], [[3]]]


def test_child_and_parent_grid_checks_agree():
    cases = [[[1]], [[1, 2], [3]], [[10]], [[-1]], [[1.0]], [[True]], [], [[]], [[0] * 31], [[0]] * 31, "ab",
             [[1, "2"]], [[0] * 30] * 30, np.array([[1, 2]]), np.array([[1.5]]), np.zeros((2, 2, 2), dtype=int)]
    for grid in cases:
        try:
            child_grids.to_grid(grid)
            child_ok = True
        except child_grids.GridError:
            child_ok = False
        assert child_ok == (grid_problem(grid) is None), grid


def test_syntax_error_is_reported_with_location(session):
    r = session.run("x = (1,\nprint(x)")
    assert r.status == "error" and r.error_kind == "SyntaxError"
    assert 'File "<cell-' in r.stderr and "SyntaxError" in r.stderr


def test_exception_traceback_shows_model_code_only(session):
    r = session.run("def f(a):\n    return a / 0\nf(1)")
    assert r.status == "error" and r.error_kind == "ZeroDivisionError"
    assert "return a / 0" in r.stderr and "ZeroDivisionError: division by zero" in r.stderr
    assert "runtime.py" not in r.stderr and "zygote" not in r.stderr


def test_output_truncation_marker(session):
    r = session.run("print('a' * 5000)")
    assert r.truncated and r.stdout.startswith("a" * 2000)
    assert "[... output truncated: 3001 more characters not shown ...]" in r.stdout


def test_code_blocks_extraction_rule():
    text = textwrap.dedent("""
        Let me look.
        ```python
        a = 1
        ```
        Grid:
        ```
        0120
        0000
        ```
        ```json
        {"x": 1}
        ```
        ```
        print(a)
        ```
        ~~~py
        b = 2
        ~~~
        ```text
        print('not code')
        ```
        ```Python3
        c = 3
    """)
    assert extract_code_blocks(text) == ["a = 1", "print(a)", "b = 2", "c = 3"]
    assert extract_code_blocks("no code here") == []
    assert extract_code_blocks("```\n[[1, 2], [3, 4]]\n```") == []  # a literal is not code
    assert extract_program("def transform(g):\n    return g") == "def transform(g):\n    return g"
    assert extract_program("just words") is None


def test_run_turn_runs_blocks_in_order_and_stops_after_submit(session):
    text = ("First:\n```python\nx = 3\nprint('x is', x)\n```\nThen:\n```python\nSUBMIT([[8, 7], [0, 9]])\n```\n"
            "```python\nprint('never')\n```")
    t = session.run_turn(text)
    assert isinstance(t, TurnResult)
    assert t.code_found and t.code_parsed and t.n_blocks == 3 and len(t.results) == 2
    assert t.submitted == [[[8, 7], [0, 9]]]
    assert t.observation == ("--- code block 1 ---\nx is 3\n--- code block 2 ---\nSUBMIT accepted: 1 grid recorded.\n"
                             "[SUBMIT ended the episode; the 1 code block(s) after it were not run.]")
    assert not t.any_error and not t.any_timeout


def test_run_turn_observation_for_errors_and_no_code(session):
    t = session.run_turn("```python\nprint(undefined_name)\n```")
    assert t.any_error and t.submitted is None
    assert "NameError: name 'undefined_name' is not defined" in t.observation
    none = session.run_turn("I will think about it.")
    assert not none.code_found and not none.code_parsed and none.results == []
    assert "no ```python code block" in none.observation
    t = session.run_turn("```python\nSUBMIT([[1, 2, 3], [4]])\n```")
    assert t.observation.endswith("SubmitError: SUBMIT rejected: grid is not rectangular (row 0 has 3 cells, row 1 has 1)")


def test_run_turn_caps_blocks_per_message(pool):
    with pool.new_session(mirror_task()) as s:
        t = s.run_turn("\n".join(f"```python\nprint({i})\n```" for i in range(10)), max_blocks=3)
        assert len(t.results) == 3 and t.n_blocks == 10
        assert "7 were skipped" in t.observation


def test_program_mode_applies_transform_to_each_input(session):
    completion = "Here:\n```python\nimport numpy as np\ndef transform(grid):\n    return np.fliplr(grid)\n```"
    p = session.run_program(completion)
    assert isinstance(p, ProgramResult) and p.compiled and p.code_found and p.code_parsed
    assert p.train_outputs == [[[2, 1], [4, 3]], [[6, 0, 5]]]
    assert p.test_outputs == [[[8, 7], [0, 9]]]
    assert p.errors == [None, None, None] and p.error is None


def test_program_mode_per_call_errors_and_time_limit(pool):
    code = textwrap.dedent("""
        def transform(grid):
            if grid.shape == (1, 3):
                while True:
                    pass
            if grid[0, 0] == 7:
                return [[1.5]]
            return grid.tolist()
    """)
    with pool.new_session(mirror_task()) as s:
        start = time.perf_counter()
        p = s.run_program(f"```python\n{code}\n```")
        assert time.perf_counter() - start >= 1.0  # one call used its 1 s of CPU time
        assert p.compiled
        assert p.train_outputs == [[[1, 2], [3, 4]], None] and p.test_outputs == [None]
        assert p.train_errors[0] is None
        assert p.train_errors[1].startswith("timeout: TimeLimitExceeded: execution exceeded the CPU time limit of 1 s")
        assert p.test_errors[0] == ("error: InvalidOutput: transform returned an invalid grid: cell (0,0) is 1.5, "
                                    "not an integer colour")
        assert p.num_timeouts == 1 and p.any_timeout


def test_program_mode_survives_a_hard_kill_and_reloads_the_program(pool):
    code = textwrap.dedent("""
        import time
        def transform(grid):
            if grid.shape == (2, 2) and grid[0, 0] == 1:
                sum(range(10 ** 12))  # C loop: the soft timer cannot interrupt it
            return grid.tolist()
    """)
    with pool.new_session(mirror_task()) as s:
        p = s.run_program(f"```python\n{code}\n```")
        assert p.train_outputs == [None, [[5, 0, 6]]] and p.test_outputs == [[[7, 8], [9, 0]]]
        assert p.train_errors[0].startswith("timeout: execution exceeded the CPU time limit of 1 s and the "
                                            "interpreter had to be killed")
        assert p.num_timeouts == 1 and s.restarts == 1


def test_program_mode_without_transform(session):
    p = session.run_program("```python\ndef solve(g):\n    return g\n```")
    assert not p.compiled and p.code_found and p.code_parsed
    assert p.error == "the program does not define a callable `transform`"
    assert p.test_outputs == [None] and p.train_errors == [p.error, p.error]
    p = session.run_program("no code")
    assert not p.compiled and not p.code_found and p.error == "no Python code found"
    p = session.run_program("```python\ndef transform(g:\n```")
    assert not p.compiled and p.code_found and not p.code_parsed and "does not parse" in p.error


# a code run that prints its label and when (wall clock, inside the sandbox) its sleep began and ended
SPAN = "import time\nt0 = time.time()\ntime.sleep({0})\nprint({1}, t0, time.time())"


def _span(result) -> tuple[str, float, float]:
    label, start, end = result.stdout.split()
    return label, float(start), float(end)


def _most_at_once(spans) -> int:
    """The largest number of (start, end) spans that overlap at one moment."""
    return max(sum(start <= t < end for start, end in spans) for t, _ in spans)


def test_async_api(pool):
    async def main():
        s1, s2 = pool.new_session(mirror_task()), pool.new_session(mirror_task())
        try:
            r1, r2 = await asyncio.gather(s1.arun(SPAN.format(0.3, 1)), s2.arun(SPAN.format(0.3, 2)))
            t = await s1.arun_turn("```python\nSUBMIT(test_inputs[0][:, ::-1])\n```")
            p = await s2.arun_program("```python\ndef transform(g):\n    return g\n```")
            return r1, r2, t, p
        finally:
            s1.close()
            s2.close()

    r1, r2, t, p = asyncio.run(main())
    assert isinstance(r1, ExecResult) and [_span(r)[0] for r in (r1, r2)] == ["1", "2"]
    assert t.submitted == [[[8, 7], [0, 9]]] and p.test_outputs == [[[7, 8], [9, 0]]]
    assert _most_at_once([_span(r1)[1:], _span(r2)[1:]]) == 2  # the two sleeps overlapped


def test_map_turns_runs_concurrently_in_order(pool):
    sessions = [pool.new_session(mirror_task()) for _ in range(4)]
    try:
        results = pool.map_turns([(s, f"```python\n{SPAN.format(0.25, i)}\n```") for i, s in enumerate(sessions)])
        spans = [r.observation.split() for r in results]
        assert [label for label, _, _ in spans] == ["0", "1", "2", "3"]
        assert _most_at_once([(float(a), float(b)) for _, a, b in spans]) == 2  # 2 workers: two at a time, not four
        with pytest.raises(ValueError, match="same session"):
            pool.map_turns([(sessions[0], "x"), (sessions[0], "y")])
    finally:
        for s in sessions:
            s.close()


def test_replay_attempt_modes(pool):
    task = mirror_task()
    out = replay_attempt(pool, task, "```python\nSUBMIT([[8, 7], [0, 9]])\n```")
    assert out.submitted and out.test_predictions == [[[8, 7], [0, 9]]] and out.extra["source"] == "submit"
    out = replay_attempt(pool, task, "```python\ndef transform(g):\n    return g[:, ::-1]\n```")
    assert not out.submitted and out.test_predictions == [[[8, 7], [0, 9]]]
    assert out.train_predictions == [[[2, 1], [4, 3]], [[6, 0, 5]]] and out.extra["source"] == "transform"
    out = replay_attempt(pool, task, "def transform(g):\n    return g", mode="auto")  # no fences: a bare program
    assert out.test_predictions == [[[7, 8], [9, 0]]]
    out = replay_attempt(pool, task, "```python\ndef transform(g):\n    return g\n```", mode="repl")
    assert out.test_predictions is None and out.extra["status"] == "ok"
    out = replay_attempt(pool, task, "```python\n1/0\n```")
    assert out.error_kind == "exception" and out.num_errors == 1 and out.code_parsed
    out = replay_attempt(pool, task, "nothing")
    assert out.extra["status"] == "no_code" and not out.code_found and out.error_kind is None
    with pytest.raises(ValueError, match="mode must be one of"):
        replay_attempt(pool, task, "", mode="bogus")


def test_close_kills_the_process_and_removes_the_work_dir(pool):
    s = pool.new_session(mirror_task())
    pid, work_dir = s._child.pid, s._child.work_dir
    assert os.path.isdir(work_dir)
    s.close()
    s.close()  # idempotent
    assert not os.path.exists(work_dir)
    with pytest.raises(RuntimeError, match="closed"):
        s.run("1")
    assert _gone(pid)


def test_open_sessions_start_in_the_background_and_close_sessions_kills_later(pool):
    sessions = pool.open_sessions([mirror_task(), two_test_task(), mirror_task()])
    deadline = time.monotonic() + 30
    while any(s._child is None for s in sessions) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(s._child is not None for s in sessions)  # started without a run asking for it
    pids = [s._child.pid for s in sessions]
    results = pool.map_turns([(s, "```python\nSUBMIT([g[:, ::-1] for g in test_inputs])\n```") for s in sessions])
    assert [r.submitted for r in results] == [[[[8, 7], [0, 9]]], [[[2, 2], [0, 2]], [[3]]], [[[8, 7], [0, 9]]]]
    pool.close_sessions(sessions)
    assert all(s.closed for s in sessions)  # closed for the caller at once
    with pytest.raises(RuntimeError, match="closed"):
        sessions[0].run("1")
    deadline = time.monotonic() + 30
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(_gone(pid) for pid in pids)  # the kills ran in the background


def test_closing_with_a_shut_down_executor_kills_at_once(pool):
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(1)
    executor.shutdown()
    s = pool.new_session(mirror_task())
    pid = s._child.pid
    s.close(executor)  # no RuntimeError("cannot schedule new futures after shutdown")
    assert s.closed and _gone(pid)


def test_a_session_closed_before_its_background_start_never_starts(pool, monkeypatch):
    from arc_trl.sandbox import Session

    gate = __import__("threading").Event()
    start_now = Session.start_now
    monkeypatch.setattr(Session, "start_now", lambda self: gate.wait(30) and start_now(self))
    [session] = pool.open_sessions([mirror_task()])
    session.close()
    gate.set()
    time.sleep(0.2)
    assert session._child is None and session.closed


def test_a_failed_background_start_is_reported_by_the_first_run(monkeypatch):
    from arc_trl.sandbox.forkserver import SandboxError

    with SandboxPool(1, FAST) as p:
        spawn = p.forkserver.spawn
        failures = iter(range(2))  # the background start and the first run's retry fail; the next run's works

        def flaky(channel):
            if next(failures, None) is not None:
                raise SandboxError("no more processes")
            return spawn(channel)

        monkeypatch.setattr(p.forkserver, "spawn", flaky)
        [session] = p.open_sessions([mirror_task()])  # never raises: the failure waits for the first run
        first = session.run("print(1)")
        assert (first.status, first.error_kind) == ("crashed", "unavailable") and "no more processes" in first.note
        second = session.run("print(2)")
        assert (second.status, second.stdout) == ("ok", "2\n")


def test_a_fresh_sessions_first_numpy_calls_import_nothing(pool):
    """The zygote warms numpy's lazily imported paths (np.unique imports numpy.ma on first use), so no session pays
    for them (~6 ms per session before)."""
    with pool.new_session(mirror_task()) as s:
        r = s.run("import sys\nbefore = set(sys.modules)\nx = train_inputs[0]\n"
                  "print(np.unique(x, return_counts=True), np.isin(x, [1]), np.setdiff1d(x, [1]), x, x / 3)\n"
                  "print(sorted(set(sys.modules) - before))")
        assert r.status == "ok" and r.stdout.splitlines()[-1] == "[]", r.stdout


def test_pool_created_in_a_thread_that_exits_keeps_working():

    made = {}
    thread = threading.Thread(target=lambda: made.update(pool=SandboxPool(1, FAST)))
    thread.start()
    thread.join()  # the thread that started the zygote is gone (PR_SET_PDEATHSIG would fire on thread exit)
    time.sleep(0.2)
    with made["pool"] as p, p.new_session(mirror_task()) as s:
        assert s.run("print('alive')").stdout == "alive\n"


def test_forgotten_session_is_killed_when_garbage_collected(pool):
    import gc

    s = pool.new_session(mirror_task())
    pid = s._child.pid
    del s
    gc.collect()
    assert _gone(pid)


def test_missing_work_root_is_a_clear_error(tmp_path):
    from arc_trl.sandbox import SandboxError

    with SandboxPool(1, SandboxConfig(work_root=str(tmp_path / "missing"))) as p, \
            pytest.raises(SandboxError, match="could not start a session: FileNotFoundError"):
        p.new_session(mirror_task())


def test_config_validation():
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        SandboxConfig(timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb must be at least 256"):
        SandboxConfig(memory_mb=100)
    with pytest.raises(ValueError, match="num_workers must be a positive integer"):
        SandboxPool(num_workers=0)


def test_pool_close_stops_zygote_and_sessions():
    p = SandboxPool(num_workers=1, config=FAST)
    s = p.new_session(mirror_task())
    zygote, child = p.zygote_pid, s._child.pid
    p.close()
    assert _gone(zygote) and _gone(child)
    with pytest.raises(RuntimeError, match="closed"):
        p.new_session(mirror_task())


def test_a_kill_racing_the_pools_close_starts_no_zygote(monkeypatch):
    """A background kill (close_sessions) checked that the zygote was alive, let go of the lock, then sent its request
    through `ForkServer.request`, which starts a zygote when none runs: a pool closing in between got a new zygote.
    The interleaving is forced (the pool closes when a kill reaches `request`), and a closed fork server must refuse
    to start one for any request."""
    from arc_trl.sandbox.forkserver import ForkServer, SandboxError

    p = SandboxPool(num_workers=1, config=FAST)
    s = p.new_session(mirror_task())
    fs, child = p.forkserver, s._child
    real_request = ForkServer.request

    def close_in_between(self, request, fd=None):
        if request.get("op") == "kill":
            p.close()
        return real_request(self, request, fd)

    monkeypatch.setattr(ForkServer, "request", close_in_between)
    generation = fs.generation
    fs.kill(child.pid, child.generation)
    p.close()
    assert fs.pid is None and fs.generation == generation  # no zygote started after (or by) the kill
    with pytest.raises(SandboxError, match="closed"):
        fs.request({"op": "ping"})
    assert fs.pid is None and fs.generation == generation


def test_close_sessions_on_a_closed_pool_kills_in_place_and_leaves_no_threads():
    p = SandboxPool(num_workers=1, config=FAST)
    sessions = [p.new_session(mirror_task())]
    p.close()
    p.close_sessions(sessions)  # used to create an executor nobody shut down
    assert sessions[0].closed and p._close_pool is None and not _live_threads(p)


def test_pool_close_waits_for_its_background_kills():
    p = SandboxPool(num_workers=2, config=FAST)
    sessions = p.open_sessions([mirror_task(), mirror_task()])
    p.map_turns([(s, "print(1)") for s in sessions])
    p.close_sessions(sessions)
    p.close()
    assert p._executors and not _live_threads(p)  # shut down and joined, not left running
    assert p.forkserver.pid is None


def test_close_sessions_racing_the_pools_close_raises_nothing():
    """`close_sessions` read `closed` (False) outside the executors' lock, then asked for its executor, which found the
    pool closed by another thread in between and raised, inside `run_episodes`' finally, in place of the episode's
    own error. The interleaving is forced: another thread closes the pool just as `close_sessions` asks for its
    executor."""
    p = SandboxPool(num_workers=1, config=FAST)
    sessions = [p.new_session(mirror_task())]
    pid, lock = sessions[0]._child.pid, p._executor_lock

    class ClosedByAnotherThreadFirst:
        fired = False

        def __enter__(self):
            if not self.fired:
                self.fired = True
                closer = threading.Thread(target=p.close)
                closer.start()
                closer.join(30)
            return lock.__enter__()

        def __exit__(self, *exc):
            return lock.__exit__(*exc)

    p._executor_lock = ClosedByAnotherThreadFirst()
    p.close_sessions(sessions)
    assert p.closed and sessions[0].closed and _gone(pid) and not _live_threads(p)


class _Unkillable:
    """The zygote's `Popen` as seen when the process outlives SIGKILL (stuck in the kernel): it never exits."""

    def __init__(self, pid: int) -> None:
        self.pid, self.signals = pid, []

    def poll(self) -> None:
        return None

    def wait(self, timeout=None):
        raise subprocess.TimeoutExpired("zygote", timeout)

    def send_signal(self, sig) -> None:
        self.signals.append(sig)

    def kill(self) -> None:
        self.signals.append(signal.SIGKILL)


def test_a_zygote_that_outlives_sigkill_is_replaced(monkeypatch):
    """A zygote that stops answering is killed; one that outlives SIGKILL left `_proc` set with `_sock` None: the
    failing request raised `subprocess.TimeoutExpired`, the next one an `AssertionError`, and the pool's close raised
    before shutting its executors down. Now the request fails with a SandboxError, the next one starts a new zygote,
    and the close stops everything."""
    from arc_trl.sandbox import forkserver
    from arc_trl.sandbox.forkserver import SandboxError

    p = SandboxPool(num_workers=2, config=FAST)
    real = p.forkserver._proc
    try:
        [first] = p.open_sessions([mirror_task()])
        assert p.map_turns([(first, "```python\nprint(1)\n```")])[0].results[0].stdout == "1\n"
        os.kill(real.pid, signal.SIGSTOP)  # it stops answering ...
        stuck = p.forkserver._proc = _Unkillable(real.pid)  # ... and SIGKILL does not end it
        monkeypatch.setattr(forkserver, "_REQUEST_TIMEOUT_S", 0.5)
        with pytest.raises(SandboxError, match="no answer from the sandbox zygote"):
            p.new_session(mirror_task())
        assert signal.SIGKILL in stuck.signals
        with p.new_session(mirror_task()) as fresh:
            assert fresh.run("print(2)").stdout == "2\n"
        assert p.zygote_pid not in (None, real.pid)
        p.close()
        assert p._executors and all(e._shutdown for e in p._executors) and not _live_threads(p)
        assert p.forkserver.pid is None
    finally:
        real.kill()
        real.wait()
        p.close()


def test_the_pools_threads_stop_even_when_stopping_the_zygote_fails(monkeypatch):
    from arc_trl.sandbox.forkserver import ForkServer

    p = SandboxPool(num_workers=1, config=FAST)
    [session] = p.open_sessions([mirror_task()])
    p.map_turns([(session, "print(1)")])
    stop = ForkServer._stop

    def failing(self):
        stop(self)
        raise OSError("could not stop the zygote")

    monkeypatch.setattr(ForkServer, "_stop", failing)
    with pytest.raises(OSError, match="could not stop the zygote"):
        p.close()
    assert p._executors and all(e._shutdown for e in p._executors) and not _live_threads(p)


def _live_threads(pool) -> list[str]:
    return [t.name for executor in pool._executors for t in executor._threads if t.is_alive()]


def test_no_leak_when_the_trainer_is_killed(tmp_path):
    script = textwrap.dedent("""
        import os, sys, time
        from arc_trl.data.task import ArcTask, Pair
        from arc_trl.sandbox import SandboxPool, SandboxConfig
        pool = SandboxPool(1, SandboxConfig(timeout_s=1.0))
        s = pool.new_session(ArcTask("t", [Pair([[1]], [[1]])], [[[1]]]))
        print(pool.zygote_pid, s._child.pid, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).resolve().parents[3]))
    zygote, child = map(int, proc.stdout.readline().split())
    assert _alive(zygote) and _alive(child)
    proc.send_signal(signal.SIGKILL)  # no atexit, no finally: the zygote must notice on its own
    proc.wait()
    assert _gone(zygote, wait_s=5) and _gone(child, wait_s=5)


def _alive(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone(pid: int, wait_s: float = 3.0) -> bool:
    """True once `pid` no longer exists (or is a zombie), waiting up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
