"""Length-prefixed JSON messages over a file descriptor: the only format that crosses the sandbox boundary.

A message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. The trainer never unpickles
anything the child sends; it reads at most `max_bytes` per message and validates every field it uses.

This file is imported both by the trainer (`arc_trl.sandbox.child.wire`) and by the sandbox child (as `wire`, from
its own directory), so it depends on the standard library only.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # hard ceiling of the header itself; callers pass tighter limits


class WireError(Exception):
    """The peer closed the channel, broke the framing, sent too much, or did not answer in time."""


class WireTimeout(WireError):
    """No complete message arrived before the deadline."""


def encode(message: Any) -> bytes:
    body = json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return HEADER.pack(len(body)) + body


def send(fd: int, message: Any) -> None:
    """Write one message (blocking) to `fd`."""
    data = memoryview(encode(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, remaining = [], n
    while remaining:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise WireTimeout(f"no reply within the time limit ({n - remaining}/{n} bytes received)")
            poller = select.poll()  # poll, not select: trainer processes may hold fds above FD_SETSIZE
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
            if not poller.poll(max(1, int(wait * 1000))):
                continue
        try:
            chunk = os.read(fd, min(remaining, 1 << 20))
        except OSError as e:  # e.g. ECONNRESET when the peer died
            raise WireError(f"channel error: {e}") from None
        if not chunk:
            raise WireError("channel closed by the peer")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(fd: int, max_bytes: int = MAX_MESSAGE_BYTES, deadline: float | None = None) -> Any:
    """Read one message from `fd`. `deadline` is a `time.monotonic()` value (None: wait forever).

    Raises `WireTimeout` past the deadline, `WireError` on EOF, an oversized message or invalid JSON.
    """
    (length,) = HEADER.unpack(_read_exact(fd, HEADER.size, deadline))
    if length > max_bytes:
        raise WireError(f"message of {length} bytes exceeds the limit of {max_bytes} bytes")
    body = _read_exact(fd, length, deadline)
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:
        raise WireError(f"invalid JSON message: {e}") from None
