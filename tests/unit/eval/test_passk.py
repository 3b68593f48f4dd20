"""pass@k: the unbiased estimator, its per-dataset average, and the files written for an evaluation folder."""

from __future__ import annotations

import json
from math import comb

import pytest

from arc_trl.eval.passk import (
    count_passes,
    default_ks,
    load_pass_at_k,
    pass_at_k,
    pass_at_k_curve,
    read_per_attempt,
    write_pass_at_k,
)


def _write_per_attempt(directory, outcomes: dict[str, list[bool | None]]) -> None:
    lines = [
        json.dumps({"task_id": task_id, "attempt": i, "passed": passed})
        for task_id, passes in outcomes.items()
        for i, passed in enumerate(passes)
    ]
    (directory / "per_attempt.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 1, 0.25),
        (4, 1, 2, 0.5),
        (4, 1, 4, 1.0),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 1, 0.4),
        (5, 0, 3, 0.0),
        (5, 5, 1, 1.0),
        (10, 1, 5, 0.5),
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_binomial_formula():
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    # C(1000, 500) overflows a float; the product form does not need it.
    value = pass_at_k(1000, 3, 500)
    assert value == pytest.approx(1 - (500 * 499 * 498) / (1000 * 999 * 998), rel=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_default_ks():
    assert default_ks(1) == [1]
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(6) == [1, 2, 4, 6]
    assert default_ks(480) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 480]
    assert default_ks(0) == []


def test_count_passes_skips_unscored_and_pools_augmented_ids():
    records = [
        {"task_id": "a", "passed": True},
        {"task_id": "a", "passed": False},
        {"task_id": "a", "passed": None},  # solutions unknown for this one: not counted
        {"task_id": "a|d3", "passed": True},  # augmented copy of task a
        {"task_id": "b", "passed": None},
    ]
    assert count_passes(records) == {"a": (3, 2)}


def test_curve_with_different_attempt_counts():
    # task a: n=4, c=1; task b: n=2, c=2 -> k=4 only averages task a.
    curve = pass_at_k_curve({"a": (4, 1), "b": (2, 2)})
    assert curve["n_tasks"] == 2
    assert (curve["min_attempts"], curve["max_attempts"]) == (2, 4)
    assert curve["pass_at_k"] == pytest.approx({"1": (0.25 + 1) / 2, "2": (0.5 + 1) / 2, "4": 1.0})
    assert curve["tasks_at_k"] == {"1": 2, "2": 2, "4": 1}


def test_curve_over_the_whole_dataset_counts_unattempted_tasks_as_failures():
    # a: n=4, c=1 (pass@1 1/4, pass@2 1/2); b: n=2, c=2; and 2 unattempted tasks of a 4-task dataset
    curve = pass_at_k_curve({"a": (4, 1), "b": (2, 2)}, dataset_tasks=4)
    assert curve["pass_at_k"] == pytest.approx({"1": (0.25 + 1) / 4, "2": (0.5 + 1) / 4, "4": 1 / 3})
    assert curve["tasks_at_k"] == {"1": 4, "2": 4, "4": 3}  # k = 4: task a and the two unattempted ones
    assert (curve["n_tasks"], curve["n_dataset_tasks"], curve["n_unattempted_tasks"]) == (2, 4, 2)
    with pytest.raises(ValueError, match="2 tasks attempted but the dataset is given 1 tasks"):
        pass_at_k_curve({"a": (4, 1), "b": (2, 2)}, dataset_tasks=1)


def test_write_pass_at_k_takes_the_dataset_from_metrics_json(tmp_path):
    _write_per_attempt(tmp_path, {"a": [True, False]})
    (tmp_path / "metrics.json").write_text(json.dumps({"n_dataset_tasks_with_solutions": 400}))
    assert write_pass_at_k(tmp_path, plot=False)["pass_at_k"] == pytest.approx({"1": 0.5 / 400, "2": 1 / 400})


def test_curve_with_explicit_ks_skips_unreachable_k():
    curve = pass_at_k_curve({"a": (4, 0), "b": (4, 4)}, ks=[3, 1, 8])
    assert curve["pass_at_k"] == pytest.approx({"1": 0.5, "3": 0.5})
    assert "8" not in curve["tasks_at_k"]


def test_write_pass_at_k_files(tmp_path):
    _write_per_attempt(tmp_path, {"a": [False, True, False, False], "b": [False] * 4, "c": [True] * 4})
    curve = write_pass_at_k(tmp_path)
    assert curve["pass_at_k"] == pytest.approx({"1": (0.25 + 0 + 1) / 3, "2": (0.5 + 0 + 1) / 3, "4": 2 / 3})
    assert json.loads((tmp_path / "pass_at_k.json").read_text()) == curve
    png = (tmp_path / "pass_at_k.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert load_pass_at_k(tmp_path) == curve


def test_unknown_solutions_give_an_empty_curve_and_no_plot(tmp_path):
    _write_per_attempt(tmp_path, {"a": [None, None]})
    curve = write_pass_at_k(tmp_path)
    assert curve["n_tasks"] == 0 and curve["pass_at_k"] == {}
    assert not (tmp_path / "pass_at_k.png").exists()


def test_load_pass_at_k_computes_from_per_attempt_or_returns_none(tmp_path):
    assert load_pass_at_k(tmp_path) is None
    _write_per_attempt(tmp_path, {"a": [True, False]})
    assert load_pass_at_k(tmp_path)["pass_at_k"] == pytest.approx({"1": 0.5, "2": 1.0})
    assert not (tmp_path / "pass_at_k.json").exists()  # computing does not write


def test_read_per_attempt_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="per_attempt.jsonl"):
        read_per_attempt(tmp_path)
    (tmp_path / "per_attempt.jsonl").write_text('{"task_id": "a", "passed": true}\n\n{"task_id": "b", oops}\n')
    with pytest.raises(ValueError, match=r"per_attempt.jsonl:3: not valid JSON"):
        read_per_attempt(tmp_path)
    (tmp_path / "per_attempt.jsonl").write_text('{"attempt": 0}\n')
    with pytest.raises(ValueError, match=r"per_attempt.jsonl:1: expected an object with a 'task_id'"):
        read_per_attempt(tmp_path / "per_attempt.jsonl")
