"""Time limits that hold under load (CPU time + wall-clock backstop), and what model code costs the trainer: nothing is
parsed in the trainer's process, code over the size limit is refused before any parsing, and a replay extracts the
code blocks once."""

from __future__ import annotations

import ast
import builtins
import os
import random
import re
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from arc_trl.data.task import ArcTask, Pair
from arc_trl.sandbox import SandboxConfig, SandboxPool, extract_code_blocks, is_python_code, replay_attempt
from arc_trl.sandbox import replay as replay_module
from arc_trl.sandbox import session as session_module
from arc_trl.sandbox.code_blocks import PYTHON_TAGS

CONFIG = SandboxConfig(timeout_s=1.0, kill_grace_s=0.5, memory_mb=512, max_output_chars=2000)
# 0.7 s of CPU, then 0.5 s of sleep; prints the CPU and wall seconds it took
SPIN_THEN_SLEEP = ("import time\nc, w = time.process_time(), time.perf_counter()\nwhile time.process_time() - c < 0.7:\n"
                   "    pass\ntime.sleep(0.5)\nprint(f'{time.process_time() - c:.3f} {time.perf_counter() - w:.3f}')")


def task() -> ArcTask:
    return ArcTask("limits", [Pair([[1, 2], [3, 4]], [[2, 1], [4, 3]])], [[[5, 6]]], [[[6, 5]]])


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(num_workers=2, config=CONFIG) as p:
        yield p


@contextmanager
def busy_process_on(cpu: int) -> Iterator[None]:
    """A competing process that spins on core `cpu` for the duration.

    It runs in a session of its own, as a sandbox session does (`setsid`): with the kernel's per-session fair share
    (autogroup), a competitor left in pytest's session shares that session's weight with whatever else the session
    runs on the other cores (a parallel test worker, say), and the sandbox then got ~70% of the core instead of half."""
    proc = subprocess.Popen([sys.executable, "-c", "while True:\n    pass"], start_new_session=True)
    try:
        os.sched_setaffinity(proc.pid, {cpu})
        time.sleep(0.3)  # let it start spinning
        yield
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------------------------------------------------
# time limits


def test_time_limits_of_a_config():
    assert SandboxConfig().time_limits() == (5.0, 20.0)  # CPU seconds, wall-clock backstop: max(4 x CPU, CPU + 5)
    assert SandboxConfig(timeout_s=1.0).time_limits() == (1.0, 6.0)
    assert SandboxConfig(timeout_s=1.0).time_limits(0.5) == (0.5, 5.5)  # a per-run limit (program mode calls)
    assert SandboxConfig(timeout_s=2.0, wall_timeout_s=3.0).time_limits() == (2.0, 3.0)
    assert SandboxConfig(timeout_s=3.0, cpu_time_s=0.3).time_limits() == (0.3, 5.3)  # legacy key: the smaller
    with pytest.raises(ValueError, match="wall_timeout_s must be a positive number or None"):
        SandboxConfig(wall_timeout_s=0)


def test_verdicts_do_not_depend_on_a_competitor_for_the_core():
    """The session shares one core with a spinning process, and its verdicts are made on CPU time: a program that
    needs 0.7 s of CPU and more than the 1 s limit of wall time is not stopped; code that spins forever is stopped by
    the CPU limit (not the wall clock) once it has used that second of CPU; C code the soft limit cannot interrupt is
    killed once its CPU time, read from the kernel by the trainer, passes the limit plus the grace period. (The
    wall-clock backstop is set far away so that a busy test machine cannot reach it.)

    No bound below depends on the share of the core the scheduler gives the session (about half here, but autogroups
    and cgroups decide it: ~70% was seen): the first program's wall time passes the limit through a sleep (its CPU
    time cannot exceed its wall time: 0.7 + 0.5 s at least), and the others are checked on their verdicts and the
    session's own CPU clock."""
    cpu = min(os.sched_getaffinity(0))
    config = SandboxConfig(timeout_s=1.0, wall_timeout_s=30.0, kill_grace_s=0.5, memory_mb=512)
    with SandboxPool(1, config) as pool, pool.new_session(task()) as s, busy_process_on(cpu):
        os.sched_setaffinity(s.protections["pid"], {cpu})
        r = s.run(SPIN_THEN_SLEEP)
        assert r.status == "ok", r
        used, wall = map(float, r.stdout.split())
        assert used < 1.0 < wall  # the scenario: more wall time than the limit, less CPU time

        before = cpu_clock(s)
        r = s.run("while True:\n    pass")
        assert (r.status, r.error_kind, r.restarted) == ("timeout", "cpu_time", False)
        # the limit's 1 s of CPU was used (ITIMER_PROF is charged in whole scheduler ticks, <= 10 ms each, to the
        # task that holds the core at each tick: off by a few ticks at most, not 10)
        assert cpu_clock(s) - before > 0.9

        r = s.run("sum(range(10 ** 13))")  # never returns to the interpreter: the trainer kills it
        assert (r.status, r.error_kind, r.restarted) == ("timeout", "hard_timeout", True)
        assert "exceeded the CPU time limit of 1 s and the interpreter had to be killed" in r.note
    assert s.closed


def cpu_clock(session) -> float:
    """CPU seconds the session's interpreter has used so far (its own clock)."""
    r = session.run("import time\nprint(time.process_time())")
    assert r.status == "ok", r
    return float(r.stdout)


def test_sleeping_code_is_stopped_by_the_wall_clock_backstop():
    with SandboxPool(1, SandboxConfig(timeout_s=1.0, wall_timeout_s=0.5)) as p, p.new_session(task()) as s:
        s.run("kept = 1")
        start = time.perf_counter()
        r = s.run("import time\ntime.sleep(100)")
        assert time.perf_counter() - start < 5.0
        assert (r.status, r.error_kind, r.restarted) == ("timeout", "wall_time", False)
        assert "wall-clock limit of 0.5 s (the code was sleeping or waiting; the CPU time limit is 1 s)" in r.stderr
        assert s.run("print(kept)").stdout == "1\n"


# --------------------------------------------------------------------------------------------------------------------
# the trainer's side: no parsing, size limit first, one extraction per replay

REPL = ("Let me look.\n```python\ndef transform(g):\n    return g[:, ::-1]\n```\n"
        "```python\nSUBMIT([transform(g) for g in test_inputs])\n```")


def test_replay_parses_nothing_in_the_trainer_and_extracts_blocks_once(pool, monkeypatch):
    calls: Counter[str] = Counter()
    real_parse, real_compile, real_extract = ast.parse, builtins.compile, extract_code_blocks

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(ast, "parse", counting("ast.parse", real_parse))
    monkeypatch.setattr(builtins, "compile", counting("compile", real_compile))
    for module in (replay_module, session_module):
        monkeypatch.setattr(module, "extract_code_blocks", counting("extract_code_blocks", real_extract))
    outcome = replay_attempt(pool, task(), REPL)
    assert outcome.submitted and outcome.test_predictions == [[[6, 5]]] and outcome.code_parsed
    assert dict(calls) == {"extract_code_blocks": 1}


def test_compiled_is_reported_by_the_sandbox(pool):
    with pool.new_session(task()) as s:
        assert s.run("x = 1").compiled and s.run("x = (").compiled is False
        assert s.run("return 1").compiled is False  # parses, but does not compile at module level
        t = s.run_turn("```python\nx = (\n```\n```python\nreturn 1\n```")
        assert t.code_found and not t.code_parsed and [r.status for r in t.results] == ["error", "error"]
        assert s.run_turn("```python\nx = (\n```\n```python\nprint(1)\n```").code_parsed


BIG = "x = 1\n" * 350_000  # 2.1 MB of valid Python, far over max_code_chars (100,000)


@pytest.mark.parametrize("completion", [
    f"```python\n{BIG}```",
    f"An untagged block:\n```\n{BIG}```",
    f"def transform(grid):\n    return grid\n{BIG}",  # no fence: a program if it defines transform
], ids=["tagged", "untagged", "no-fence"])
def test_a_2mb_completion_is_refused_before_any_parsing(pool, completion):
    tracemalloc.start()
    cpu = time.thread_time()
    try:
        outcome = replay_attempt(pool, task(), completion)
        cpu = time.thread_time() - cpu
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (outcome.extra["status"], outcome.error_kind) == ("refused", "refused")
    assert outcome.code_found and not outcome.code_parsed
    assert cpu < 0.5, f"{cpu:.2f} s of the trainer's CPU"  # parsing it took seconds
    assert peak < 30 * 2 ** 20, f"{peak / 2 ** 20:.0f} MB"  # parsing it took ~1 GB


# --------------------------------------------------------------------------------------------------------------------
# extract_code_blocks finds fences by substring search: the same blocks as the line-by-line rule

_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")


def reference_blocks(text: str) -> list[str]:
    """The rule of docs/sandbox.md applied line by line over `text.splitlines()`."""
    found, fence, tag, lines = [], None, "", []
    for line in text.splitlines():
        if fence is None:
            match = _FENCE_OPEN.match(line)
            if match:
                fence, lines = match.group("fence"), []
                tag = match.group("info").split()[0].lower() if match.group("info").strip() else ""
            continue
        stripped = line.strip()
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            found.append((tag, "\n".join(lines)))
            fence = None
            continue
        lines.append(line)
    if fence is not None:
        found.append((tag, "\n".join(lines)))
    return [code for tag, code in found
            if (tag in PYTHON_TAGS and code.strip()) or (tag == "" and is_python_code(code))]


def test_block_extraction_matches_the_line_by_line_rule():
    pieces = ["```", "````", "~~~", "```python", "``` py extra", "~~~python", "```text", "print(1)", "x = 1", "[1]",
              "  ", "\t", "\n", "\n", "\n", "\r\n", "\r", "\u2028", "\x0c", "\x85", "\xa0", "\u3000", "`", "``",
              "x ```", "  ```"]
    rng = random.Random(0)
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        assert extract_code_blocks(text) == reference_blocks(text), repr(text)
