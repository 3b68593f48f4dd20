"""The suite's files in the order of their running time, longest first (tests/durations.json: seconds per file from a
whole run). `make test` runs two workers that each take a whole file at a time (`-n 2 --dist loadfile
--no-loadscope-reorder`): started longest first, the workers end close together, instead of one of them starting the
learning run (~6 min) when the other has nothing left. A file the table does not name runs after the named ones,
in collection order.

Refresh the table from a whole run: `ARC_TRL_TEST_DURATIONS=tests/durations.json make test` (setup, call and
teardown seconds summed per file; written by the controller once the run ends)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
WRITE_ENV = "ARC_TRL_TEST_DURATIONS"
_seconds: dict[str, float] = {}


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """The positions of `nodeids` reordered: files by their seconds, longest first; the unnamed ones after them in
    collection order; the tests of a file in their own order."""
    first_seen = {f: i for i, f in enumerate(dict.fromkeys(map(file_of, nodeids)))}

    def key(position: int) -> tuple[float, int]:
        name = file_of(nodeids[position])
        return -seconds.get(name, -1.0), first_seen[name]

    return sorted(range(len(nodeids)), key=key)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items[:] = [items[i] for i in longest_first([item.nodeid for item in items], seconds)]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get(WRITE_ENV):
        _seconds[file_of(report.nodeid)] = _seconds.get(file_of(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(WRITE_ENV)
    if path and _seconds and not hasattr(session.config, "workerinput"):  # the controller, or a run without workers
        table = {name: round(s, 1) for name, s in sorted(_seconds.items(), key=lambda kv: -kv[1])}
        Path(path).write_text(json.dumps(table, indent=0) + "\n")
