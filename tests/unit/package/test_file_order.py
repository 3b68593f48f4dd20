"""tests/file_order.py: `make test`'s two workers take whole files longest first (tests/durations.json)."""

from __future__ import annotations

import json
from pathlib import Path

from file_order import DURATIONS, longest_first


def test_files_run_longest_first_then_the_unnamed_ones_in_collection_order():
    nodeids = ["a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "d.py::t1", "b.py::t2"]
    order = [nodeids[i] for i in longest_first(nodeids, {"b.py": 90.0, "d.py": 300.0, "a.py": 0.5})]
    assert order == ["d.py::t1", "b.py::t1", "b.py::t2", "a.py::t1", "a.py::t2", "c.py::t1"]


def test_the_committed_table_names_the_files_of_the_suite():
    """A renamed or removed file left in the table orders nothing: the table is refreshed with the suite."""
    table = json.loads(DURATIONS.read_text())
    root = DURATIONS.parents[1]
    missing = [name for name in table if not (root / name).is_file()]
    assert not missing, f"tests/durations.json names files that are gone: {missing} (refresh it: tests/file_order.py)"
    assert all(isinstance(s, (int, float)) and s >= 0 for s in table.values())
    assert Path(root / "tests" / "integration" / "test_learning.py").relative_to(root).as_posix() in table
