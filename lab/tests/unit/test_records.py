"""Committed records load alike plain or gzipped, and a record committed both ways is refused."""

import gzip
import json

import pytest

from arc_experiments.figures.records import load_record, record_paths

RECORD = {"arm": "server-async1", "seed": 2, "evaluations": {"0": "{\"task_id\": \"t\"}\n"}}


def test_a_gzipped_record_loads_as_the_plain_one_and_under_the_same_name(tmp_path):
    (tmp_path / "server_learning_server.json").write_text(json.dumps(RECORD))
    with gzip.open(tmp_path / "server_learning_server-async1.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(RECORD, handle)
    (tmp_path / "layout_1gpu-colocate.json").write_text("{}")  # another pattern: not listed

    paths = record_paths(tmp_path, "server_learning_*")

    assert list(paths) == ["server_learning_server", "server_learning_server-async1"]
    assert load_record(paths["server_learning_server-async1"]) == load_record(paths["server_learning_server"]) == RECORD


def test_a_record_committed_both_plain_and_gzipped_is_refused_naming_both(tmp_path):
    (tmp_path / "server_learning_server.json").write_text(json.dumps(RECORD))
    with gzip.open(tmp_path / "server_learning_server.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(RECORD, handle)

    with pytest.raises(ValueError, match=r"server_learning_server\.json and server_learning_server\.json\.gz"):
        record_paths(tmp_path, "server_learning_*")
