"""Child processes in their own process group, stopped as a group (vLLM and accelerate spawn workers), and signals
turned into an exception so that `finally:` blocks clean up on SIGTERM (HTCondor's stop signal) or Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import IO

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Terminated(Exception):
    """Raised in the main thread when the process receives one of STOP_SIGNALS."""

    def __init__(self, signum: int):
        super().__init__(f"received signal {signal.Signals(signum).name}")
        self.signum = signum


def start(command: list[str], env: dict[str, str], stdout: IO | int | None = None) -> subprocess.Popen:
    """Start `command` in a new session (its own process group); stderr goes where stdout goes."""
    return subprocess.Popen(command, env=env, stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the process group, SIGKILL it after `grace_s`; also reaps workers left by an exited leader. A stopped
    group (SIGSTOP, a debugger) gets SIGCONT after the SIGTERM, so that it handles it now, not after `grace_s`."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
            if sig == signal.SIGTERM:
                os.killpg(process.pid, signal.SIGCONT)
        try:
            process.wait(timeout=wait_s)
            if sig == signal.SIGTERM:
                # The leader is gone; make sure no worker of its group survives it.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """Within the block, SIGTERM/SIGINT/SIGHUP raise `Terminated` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
