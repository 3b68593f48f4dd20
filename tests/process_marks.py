"""Processes marked by an environment variable (every process a run starts inherits it): what a test or drill counts
as left running once the run has ended. Used by tests/integration/test_hung_server.py and
benchmarks/hung_server_drill.py."""

from __future__ import annotations

import os
from pathlib import Path

MARK = "ARC_DRILL"


def marked(value: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process (zombies excluded) whose environment holds `ARC_DRILL=value`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if f"{MARK}={value}".encode() not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]))
        except OSError:
            continue
    return found
