"""Bootstrap CIs over tasks of one run (arc_experiments/learning/bootstrap.py) and the per-task pass@1 reader
(per_task.py)."""

from __future__ import annotations

import json

import pytest

from arc_experiments.learning.bootstrap import TaskMismatchError, bootstrap_ci, paired_bootstrap, pool_seeds
from arc_experiments.learning.per_task import per_task_pass1


def _arm(values):
    return {f"t{i:03d}": v for i, v in enumerate(values)}


def test_identical_arms_give_a_zero_interval():
    a = _arm([0.0, 0.25, 0.5, 1.0, 0.75, 0.0])
    out = paired_bootstrap(a, dict(a))
    assert out["mean_diff"] == 0.0 and out["ci"] == [0.0, 0.0] and out["n_tasks"] == 6


def test_a_constant_shift_is_the_interval():
    b = _arm([0.0, 0.25, 0.5, 0.5, 0.25, 0.0, 0.75])
    a = {t: v + 0.25 for t, v in b.items()}
    out = paired_bootstrap(a, b)
    assert out["mean_diff"] == pytest.approx(0.25)
    assert out["ci"] == pytest.approx([0.25, 0.25])
    assert out["mean_a"] - out["mean_b"] == pytest.approx(0.25)


def test_interval_covers_the_mean_and_is_deterministic():
    import random

    rng = random.Random(3)
    b = _arm([rng.choice([0, 0.25, 0.5]) for _ in range(200)])
    a = {t: min(1.0, v + rng.choice([0, 0, 0.25])) for t, v in b.items()}
    out = paired_bootstrap(a, b)
    lo, hi = out["ci"]
    assert lo < out["mean_diff"] < hi and lo > 0  # a = b + a non-negative shift, positive on about a third
    assert paired_bootstrap(a, b) == out  # fixed generator seed


def test_hand_computable_two_task_interval():
    # differences 0 and 1: a resample of 2 tasks has mean 0 (p=1/4), 0.5 (1/2) or 1 (1/4); the 2.5th and 97.5th
    # percentiles of 10,000 such means are 0 and 1
    out = paired_bootstrap({"x": 1.0, "y": 1.0}, {"x": 1.0, "y": 0.0})
    assert out["mean_diff"] == 0.5 and out["ci"] == [0.0, 1.0]


def test_missing_or_wrong_task_ids_are_named():
    a = _arm([0.5, 0.5, 0.5])
    b = {"t000": 0.5, "t001": 0.5, "zzz": 0.5}
    with pytest.raises(TaskMismatchError, match=r"missing from student: 1 task\(s\): t002; missing from grpo: 1 "
                                                 r"task\(s\): zzz"):
        paired_bootstrap(a, b, names=("grpo", "student"))


def test_seeds_are_pooled_per_task():
    s0, s1 = {"a": 0.0, "b": 1.0}, {"a": 0.5, "b": 0.5}
    assert pool_seeds([s0, s1]) == {"a": 0.25, "b": 0.75}
    out = paired_bootstrap([s0, s1], {"a": 0.25, "b": 0.75})
    assert out["ci"] == [0.0, 0.0]
    with pytest.raises(TaskMismatchError, match="seed #1"):
        pool_seeds([s0, {"a": 0.5}], "grpo-opd")


def test_single_arm_interval():
    out = bootstrap_ci(_arm([0.5] * 10))
    assert out["mean"] == 0.5 and out["ci"] == [0.5, 0.5] and out["n_seeds"] == 1
    out = bootstrap_ci([_arm([0.0, 1.0] * 50), _arm([1.0, 0.0] * 50)])  # pooled: 0.5 everywhere
    assert out["ci"] == [0.5, 0.5] and out["n_seeds"] == 2
    out = bootstrap_ci(_arm([0.0, 1.0] * 100))
    assert out["ci"][0] < 0.5 < out["ci"][1] and out["ci"][1] - out["ci"][0] == pytest.approx(0.14, abs=0.02)


def test_pass_values_outside_0_1_are_refused():
    with pytest.raises(ValueError, match="lie in"):
        bootstrap_ci({"a": 2.0})


def _per_attempt(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "per_attempt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_per_task_pass1_reads_per_attempt(tmp_path):
    rows = [{"task_id": "b", "attempt": i, "passed": i < 1} for i in range(4)]
    rows += [{"task_id": "a", "attempt": i, "passed": i < 3} for i in range(4)]
    rows += [{"task_id": "a|rot90", "attempt": 4, "passed": None}]  # unscored: left out
    _per_attempt(tmp_path / "ev", rows)
    assert per_task_pass1(tmp_path / "ev", expected_attempts=4) == {"a": 0.75, "b": 0.25}
    assert list(per_task_pass1(tmp_path / "ev")) == ["a", "b"]
    _per_attempt(tmp_path / "short", rows[:7])
    with pytest.raises(ValueError, match=r"1 task\(s\) without 4 scored attempts: a \(3\)"):
        per_task_pass1(tmp_path / "short", expected_attempts=4)
