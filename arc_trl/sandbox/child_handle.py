"""The trainer's handle on one session process (the code that runs inside it is in `child/`).

`ChildHandle.request` sends one request and reads the reply with a size cap and CPU / wall-clock deadlines, raising
`ChildLost` when the child does not answer properly; `kill_child` kills it through its zygote and cleans up;
`describe_exit` and `exit_kind` say how it ended; `resident_mb` reads its memory.
"""

from __future__ import annotations

import math
import os
import select
import signal
import socket
import time
import weakref
from dataclasses import dataclass
from typing import Any

from arc_trl.sandbox.child import wire
from arc_trl.sandbox.child.tree import remove_tree

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_MIN_CPU_CHECK_S = 0.05


class ChildLost(Exception):
    """The child did not answer properly: 'timeout' (past a hard limit, named by `detail`), 'died' (EOF) or
    'protocol'."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass(eq=False)
class ChildHandle:
    """One running session process, as forked by the zygote of generation `generation`."""

    pid: int
    channel: socket.socket
    work_dir: str
    generation: int
    finalizer: weakref.finalize | None = None  # kills the process; also runs if the session is garbage-collected
    cpu_seen: float = 0.0  # the child's CPU seconds at its last reply (what it used before the next request)

    def request(self, message: dict[str, Any], cpu_s: float, wall_s: float, kill_grace_s: float,
                max_reply_bytes: int) -> dict[str, Any]:
        """Send `message` (its `id` set) and read the reply, within the limits (raises ChildLost)."""
        fd = self.channel.fileno()
        try:
            wire.send(fd, message)
        except OSError as e:
            raise ChildLost("died", f"could not send the request ({e})") from None
        wall_deadline = self._await_reply(cpu_s, wall_s, kill_grace_s)
        try:
            deadline = max(wall_deadline, time.monotonic() + kill_grace_s)
            reply = wire.receive(fd, max_bytes=max_reply_bytes, deadline=deadline)
        except wire.WireTimeout:
            raise ChildLost("timeout", f"the time limit of {wall_s:g} s (wall clock)") from None
        except wire.WireError as e:
            kind = "died" if "closed" in str(e) or "channel error" in str(e) else "protocol"
            raise ChildLost(kind, str(e)) from None
        if not isinstance(reply, dict) or reply.get("id") != message["id"]:
            raise ChildLost("protocol", "reply does not match the request")
        cpu_total = reply.get("cpu_total")
        if isinstance(cpu_total, float) and math.isfinite(cpu_total) and cpu_total >= 0:
            self.cpu_seen = cpu_total
        return reply

    def _await_reply(self, cpu_s: float, wall_s: float, grace: float) -> float:
        """Wait until the child starts answering; returns the wall-clock deadline of the request.

        Raises ChildLost('timeout') once the child's CPU time for this request passes `cpu_s + grace`, or the
        wall clock passes `wall_s + grace`. The CPU time is the kernel's count (/proc) minus what the child
        had used at its last reply (as it reported it: a report above the kernel's count is ignored, and a child that
        misreports gains nothing past the wall-clock backstop). It is only read when it could have passed the limit
        (one thread's CPU time cannot run ahead of the wall clock).
        """
        start = time.monotonic()
        wall_deadline = start + wall_s + grace
        cpu_budget = cpu_s + grace
        next_check = start + cpu_budget
        poller = select.poll()
        poller.register(self.channel.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            now = time.monotonic()
            if now >= wall_deadline:
                raise ChildLost("timeout", f"the time limit of {wall_s:g} s (wall clock)")
            if now >= next_check:
                total = process_cpu_s(self.pid)
                if total is not None and total < self.cpu_seen:
                    self.cpu_seen = 0.0  # the child reported more CPU than the kernel counted: trust only the kernel
                used = None if total is None else total - self.cpu_seen
                if used is None:
                    next_check = math.inf  # /proc unreadable: the wall-clock backstop still holds
                elif used >= cpu_budget:
                    raise ChildLost("timeout", f"the CPU time limit of {cpu_s:g} s")
                else:
                    next_check = now + max(_MIN_CPU_CHECK_S, cpu_budget - used)
            wait = min(wall_deadline, next_check) - now
            if poller.poll(max(1, math.ceil(wait * 1000))):
                return wall_deadline


def kill_child(forkserver: Any, pid: int, generation: int, channel: socket.socket, work_dir: str) -> dict[str, Any]:
    """Kill a child (through its zygote), close the channel, remove its working directory. Never raises."""
    try:
        info = forkserver.kill(pid, generation)
    except Exception:  # noqa: BLE001  SandboxError, or anything else: cleanup must not fail the trainer
        info = {"exit_code": None, "signal": None}
    channel.close()
    if os.path.lexists(work_dir):  # normally already discarded by the zygote; here only if the zygote is gone
        remove_tree(work_dir)  # iterative: a 10 000-level folder tree cannot raise RecursionError
    return info


def resident_mb(pid: int) -> float | None:
    """Resident memory of a process in MB (None when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_SIZE / 2**20
    except (OSError, ValueError, IndexError):
        return None


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) used so far by process `pid`, from /proc (None when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()  # after "pid (comm) ": state is field 3, utime 14, stime 15
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return None


def exit_kind(info: dict[str, Any]) -> str:
    """`signal:NAME`, `exit:CODE` or `died`, from what `kill_child` returned."""
    if info.get("signal"):
        return f"signal:{signal_name(info['signal'])}"
    if info.get("exit_code") is not None:
        return f"exit:{info['exit_code']}"
    return "died"


def describe_exit(info: dict[str, Any]) -> str | None:
    """How the child ended, in words (None when unknown), from what `kill_child` returned."""
    sig = info.get("signal")
    if sig:
        name = signal_name(sig)
        hint = " (for example out of memory)" if sig == signal.SIGKILL else ""
        return f"was killed by signal {name}{hint}"
    if info.get("exit_code") is not None:
        return f"exited with code {info['exit_code']}"
    return None


def signal_name(number: Any) -> str:
    try:
        return signal.Signals(int(number)).name
    except (ValueError, TypeError):
        return str(number)
