"""Hostile code against the sandbox's shared resources: folder trees, scheduling, root privileges, SysV IPC, disk,
file count and idle memory. Each snippet runs through the public API, as a model's code would."""

from __future__ import annotations

import ctypes
import fcntl
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from arc_trl.data.task import ArcTask, Pair
from arc_trl.sandbox import SandboxConfig, SandboxPool
from arc_trl.sandbox.child.tree import remove_tree

DEEP_TREE = "import os\nfor i in range(1100):\n    os.mkdir('d')\n    os.chdir('d')\nprint(len(os.getcwd()))"


def task() -> ArcTask:
    return ArcTask("limits", [Pair([[1, 2]], [[2, 1]])], [[[3, 4]]], [[[4, 3]]])


@pytest.fixture(scope="module")
def bare_pool():
    """Audit hook off: what holds once model code has bypassed the Python-level layer (ctypes available)."""
    config = SandboxConfig(timeout_s=2.0, memory_mb=512, audit_hook=False, disk_mb=4, max_files=500)
    with SandboxPool(num_workers=2, config=config) as p:
        yield p


def kernel_layers(session) -> None:
    if not session.protections.get("seccomp"):
        pytest.skip(f"seccomp unavailable here: {session.protections}")


def fast_dir(tmp_path) -> str:
    """A folder on tmpfs where there is one (the loaded CI disk makes 1000s of nested folders slow)."""
    return tempfile.mkdtemp(dir="/dev/shm") if os.access("/dev/shm", os.W_OK) else str(tmp_path)


def test_remove_tree_deeper_than_path_max(tmp_path):
    top = Path(fast_dir(tmp_path)) / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(1100):  # deeper than the recursion limit (1000); 1100 * "dddd/" > PATH_MAX (4096)
        os.mkdir("dddd", dir_fd=fd)
        new = os.open("dddd", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = new
    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    os.close(fd)
    assert remove_tree(str(top)) is True
    assert not top.exists()
    assert remove_tree(str(top)) is True  # already gone: fine
    os.rmdir(top.parent)


@pytest.mark.parametrize("private_tmpfs", [True, False])
def test_deep_folder_tree_does_not_hurt_the_trainer(private_tmpfs, tmp_path):
    root = fast_dir(tmp_path)
    config = SandboxConfig(timeout_s=10.0, memory_mb=512, private_tmpfs=private_tmpfs, max_files=5000, work_root=root)
    with SandboxPool(num_workers=2, config=config) as pool:
        bystander = pool.new_session(task())
        assert bystander.run("x = 41").status == "ok"
        deep = pool.new_session(task())
        work_dir = deep._child.work_dir
        assert deep.run(DEEP_TREE).status == "ok"
        r = deep.run("import os\nos._exit(3)")  # the child exits with the tree in place: Session.run cleans up
        assert (r.status, r.error_kind, r.restarted) == ("crashed", "exit:3", True)
        assert deep.run(DEEP_TREE).status == "ok"
        deep.close()  # must not raise
        assert not os.path.exists(work_dir)
        assert bystander.run("print(x + 1)").stdout == "42\n"  # the zygote survived: no state lost elsewhere
        bystander.close()
    assert remove_tree(root) and not os.path.exists(root)


def test_scheduling_of_other_processes_is_refused(bare_pool):
    victim = subprocess.Popen(["sleep", "30"])
    try:
        affinity = os.sched_getaffinity(victim.pid)
        with bare_pool.new_session(task()) as s:
            kernel_layers(s)
            v = victim.pid
            for code in (f"os.setpriority(os.PRIO_PROCESS, {v}, 19)", f"os.sched_setaffinity({v}, {{0}})",
                         f"os.sched_setscheduler({v}, os.SCHED_IDLE, os.sched_param(0))",
                         f"os.sched_setparam({v}, os.sched_param(0))",
                         "os.setpriority(os.PRIO_PGRP, 0, 19)", "os.setpriority(os.PRIO_USER, 0, 19)"):
                r = s.run("import os\n" + code)
                assert r.status == "error" and "[Errno 1] Operation not permitted" in r.stderr, (code, r.stderr)
            r = s.run("import os\nos.setpriority(os.PRIO_PROCESS, 0, 5)\nos.sched_setaffinity(0, {0})\n"
                      "os.setpriority(os.PRIO_PROCESS, os.getpid(), 6)\nprint(os.getpriority(os.PRIO_PROCESS, 0))")
            assert (r.status, r.stdout) == ("ok", "6\n"), r.stderr  # its own scheduling stays its own business
        assert os.getpriority(os.PRIO_PROCESS, victim.pid) == 0
        assert os.sched_getaffinity(victim.pid) == affinity
        assert os.sched_getscheduler(victim.pid) == os.SCHED_OTHER
    finally:
        victim.kill()
        victim.wait()


def test_root_privileges_are_dropped(bare_pool):
    with bare_pool.new_session(task()) as s:
        kernel_layers(s)
        assert s.protections.get("capabilities") == "dropped"
        # the clock is "set" to the value it already has: refused before it could take effect
        code = "import time\ntime.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME))"
        refused = {
            "clock": code,
            "fifo": "import os\nos.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))",
            "nice": "import os\nos.setpriority(os.PRIO_PROCESS, 0, -20)",
            "immutable": "import os, fcntl, array\nfd = os.open('f', os.O_RDONLY | os.O_CREAT)\n"
                         "fcntl.ioctl(fd, 0x40086602, array.array('l', [0x10]))",
        }
        try:
            for name, snippet in refused.items():
                r = s.run(snippet)
                assert r.status == "error" and "PermissionError: [Errno" in r.stderr, (name, r.stderr)
        finally:
            _clear_immutable(s._child.work_dir)


def _clear_immutable(work_dir: str) -> None:
    """Undo what the immutable test did where the sandbox let it (main before the fix): never leave such a file."""
    path = os.path.join(work_dir, "f")
    if os.geteuid() == 0 and os.path.exists(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, 0x40086602, bytearray(8))
        except OSError:
            pass
        finally:
            os.close(fd)


def test_sysv_ipc_is_refused(bare_pool):
    libc = ctypes.CDLL(None, use_errno=True)
    with bare_pool.new_session(task()) as s:
        kernel_layers(s)
        r = s.run("import ctypes\nlibc = ctypes.CDLL(None)\n"
                  "print(libc.msgget(0, 0o1600), libc.shmget(0, 4096, 0o1600), libc.semget(0, 1, 0o1600))")
        ids = [int(x) for x in r.stdout.split()]
        for kind, ident in zip(("msg", "shm", "sem"), ids):
            if ident >= 0:  # created (main before the fix): remove it so nothing outlives the test
                if kind == "msg":
                    libc.msgctl(ident, 0, None)
                elif kind == "shm":
                    libc.shmctl(ident, 0, None)
                else:
                    libc.semctl(ident, 0, 0)
        assert ids == [-1, -1, -1], r.stdout


def test_disk_and_file_count_quota(bare_pool):
    with bare_pool.new_session(task()) as s:
        if not s.protections.get("disk_quota") and os.geteuid() != 0:  # as root it must be there
            pytest.skip(f"no private tmpfs here: {s.protections}")
        r = s.run("n = 0\ntry:\n    for i in range(3000):\n        open(f'f{i}', 'w').close()\n        n += 1\n"
                  "except OSError as e:\n    print(n, e.errno)")
        assert r.stdout == "500 28\n", r.stdout + r.stderr  # max_files=500: ENOSPC at the 501st file
        r = s.run("import os\nfor i in range(500):\n    os.remove(f'f{i}')\n"
                  "block = b'x' * (1 << 20)\nwritten = 0\ntry:\n    for i in range(10):\n"
                  "        with open(f'big{i}', 'wb') as f:\n            f.write(block)\n            f.flush()\n"
                  "        written += 1\nexcept OSError as e:\n    print(written, e.errno)")
        assert r.status == "ok" and r.stdout in ("3 28\n", "4 28\n"), r.stdout + r.stderr  # disk_mb=4
        assert s.run("print('still serving')").stdout == "still serving\n"


def test_file_bomb_cleanup_is_off_the_request_path(tmp_path):
    """Without a private tmpfs, a session's folder is moved to a trash folder and deleted by a helper process."""
    config = SandboxConfig(timeout_s=5.0, memory_mb=512, private_tmpfs=False, work_root=str(tmp_path))
    with SandboxPool(num_workers=1, config=config) as pool:
        s = pool.new_session(task())
        work_dir = s._child.work_dir
        assert s.run("for i in range(1000):\n    open(f'f{i}', 'w').close()").status == "ok"
        s.close()
        assert not os.path.exists(work_dir)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(p.name != "arc-sandbox-trash" or any(p.iterdir())
                                                  for p in tmp_path.iterdir()):
            time.sleep(0.05)
    assert [p.name for p in tmp_path.iterdir()] in ([], ["arc-sandbox-trash"])
    assert not any(p.iterdir() for p in tmp_path.iterdir())


def test_idle_session_memory_is_capped():
    config = SandboxConfig(timeout_s=2.0, memory_mb=512, idle_memory_mb=150)
    with SandboxPool(num_workers=1, config=config) as pool, pool.new_session(task()) as s:
        assert s.run("small = np.ones(1000)").note is None
        r = s.run("big = np.ones(200 * 2**20 // 8)")
        assert r.status == "ok" and r.restarted and "idle_memory_mb" in r.note, r
        assert s.run("print('big' in dir(), 'small' in dir())").stdout == "False False\n"
        assert s.run("big = np.ones(10)\nprint(big.sum())").stdout == "10.0\n"


def test_arc_config_limits_reach_the_sandbox():
    from arc_trl.config import ArcConfig

    arc = ArcConfig(sandbox_disk_mb=12, sandbox_max_files=345, sandbox_idle_memory_mb=222)
    config = arc.sandbox_config()
    assert (config.disk_mb, config.max_files, config.idle_memory_mb) == (12, 345, 222)
    assert config.memory_mb == arc.sandbox_memory_mb and config.timeout_s == arc.sandbox_timeout_s
    with pytest.raises(ValueError, match="idle_memory_mb must be at least 64"):
        SandboxConfig(idle_memory_mb=10)
    with pytest.raises(ValueError, match="max_files must be a positive number"):
        SandboxConfig(max_files=0)
