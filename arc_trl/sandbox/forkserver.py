"""The trainer's handle on the sandbox zygote (the fork server in `child/zygote.py`).

The zygote is started with `subprocess.Popen([sys.executable, "-I", zygote.py, ...])`: a fresh interpreter with a
scrubbed environment, so no trainer memory (test outputs, tokens, model) ever reaches a sandbox process. It imports
numpy once and forks one child per session in a few milliseconds. All requests go through one SOCK_SEQPACKET socket,
serialised by a lock; every wait has a timeout, and a dead zygote is restarted on the next request.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from arc_trl.sandbox.config import SandboxConfig

ZYGOTE_SCRIPT = str(Path(__file__).resolve().parent / "child" / "zygote.py")
_REQUEST_TIMEOUT_S = 15.0
_PASSED_ENV = ("PATH", "LD_LIBRARY_PATH", "SYSTEMROOT")


class SandboxError(RuntimeError):
    """The sandbox machinery itself failed (could not start a process, zygote died, ...)."""


class ForkServer:
    """Starts session processes and kills them. Thread-safe; restarts the zygote when it has died."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self.generation = 0  # incremented at each zygote start; pids of an older generation are gone
        self._owner_pid = os.getpid()
        self._closed = False  # once closed, no request starts a zygote again (a late background kill included)

    # --- lifecycle

    def _start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        options = {"allowed_packages": list(self.config.allowed_packages),
                   "work_root": self.config.work_root or tempfile.gettempdir()}
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env.update(LANG="C.UTF-8", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", ZYGOTE_SCRIPT, str(child.fileno()), json.dumps(options)],
                pass_fds=[child.fileno()], env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C in the trainer's terminal does not reach it
            )
        finally:
            child.close()
        self._sock = parent
        self.generation += 1
        try:
            self._exchange({"op": "ping"}, None, self.config.start_timeout_s)
        except SandboxError as e:
            code = self._proc.poll()
            self._stop()
            raise SandboxError(f"the sandbox zygote did not start ({e}; exit code {code}); "
                               f"command: {sys.executable} -I {ZYGOTE_SCRIPT}") from None

    def _stop(self) -> None:
        """Close the socket and reap the zygote; never raises. Both are forgotten whatever happens: a zygote that
        outlives SIGKILL (stuck in the kernel) is left to exit on its own (its socket closed, its sessions die with it;
        subprocess reaps it later), and the next request starts a new one."""
        if self._sock is not None:
            self._sock.close()  # the zygote sees EOF, kills every session and exits
            self._sock = None
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if os.getpid() == self._owner_pid:
                self._stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # --- requests

    def _exchange(self, request: dict[str, Any], fd: int | None, timeout: float) -> dict[str, Any]:
        if self._sock is None:
            raise SandboxError("the sandbox zygote is not running")
        data = json.dumps(request).encode()
        try:
            self._sock.settimeout(timeout)
            if fd is None:
                self._sock.sendall(data)
            else:
                self._sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            reply = self._sock.recv(65536)
        except (TimeoutError, OSError) as e:
            raise SandboxError(f"no answer from the sandbox zygote: {e}") from None
        if not reply:
            raise SandboxError("the sandbox zygote closed its socket")
        try:
            return json.loads(reply)
        except ValueError as e:
            raise SandboxError(f"invalid reply from the sandbox zygote: {e}") from None

    def request(self, request: dict[str, Any], fd: int | None = None) -> tuple[dict[str, Any], int]:
        """Send one request (starting the zygote if needed); returns (reply, generation)."""
        if os.getpid() != self._owner_pid:
            raise SandboxError("a SandboxPool cannot be used in a forked copy of the process that created it; "
                               "create the pool in the process that uses it")
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            if self._proc is None or self._sock is None or self._proc.poll() is not None:
                self._stop()
                self._start()
            try:
                return self._exchange(request, fd, _REQUEST_TIMEOUT_S), self.generation
            except SandboxError:
                self._kill_zygote()
                raise

    def _kill_zygote(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._proc.send_signal(signal.SIGKILL)
            except OSError:
                pass
        self._stop()

    def spawn(self, channel: socket.socket) -> tuple[int, str, int]:
        """Fork a session process talking over `channel` (its end is passed to the child); (pid, work_dir, gen)."""
        reply, generation = self.request({"op": "spawn"}, channel.fileno())
        if not reply.get("ok"):
            raise SandboxError(f"the sandbox zygote could not start a session: {reply.get('error')}")
        return int(reply["pid"]), str(reply["work_dir"]), generation

    def kill(self, pid: int, generation: int) -> dict[str, Any]:
        """SIGKILL a session process and reap it; returns {"exit_code", "signal"} (None values when unknown)."""
        gone = {"exit_code": None, "signal": None}
        with self._lock:  # the check and the exchange under one hold: a kill never starts a zygote (nor a new one
            alive = self._sock is not None and self._proc is not None and self._proc.poll() is None  # after close)
            if self._closed or not alive or generation != self.generation:
                return gone  # its zygote is gone, and with it the session
            try:
                reply = self._exchange({"op": "kill", "pid": pid}, None, _REQUEST_TIMEOUT_S)
            except SandboxError:
                self._kill_zygote()
                return gone
        return {"exit_code": reply.get("exit_code"), "signal": reply.get("signal")}
