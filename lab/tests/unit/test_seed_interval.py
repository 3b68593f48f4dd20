"""Seed-aware t intervals (arc_experiments/learning/seed_interval.py) and the t quantile they use (student_t.py); each
expected interval is derived by hand in the test."""

from __future__ import annotations

import math

import pytest

from arc_experiments.learning.bootstrap import TaskMismatchError
from arc_experiments.learning.seed_interval import SeedVariance, pooled_seed_variance, seed_interval
from arc_experiments.learning.student_t import t_cdf, t_quantile


def _runs(rows, tasks=("a", "b", "c", "d")):
    """Runs given as rows of per-task values."""
    return [dict(zip(tasks, row)) for row in rows]


def test_t_quantiles_match_their_closed_forms():
    for p in (0.975, 0.9, 0.6):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-10)  # Cauchy
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-10)
        assert t_quantile(1 - p, 2) == pytest.approx(-t_quantile(p, 2))
    # df 4 and infinity (the normal): the tabled values
    assert t_quantile(0.975, 4) == pytest.approx(2.776445105, rel=1e-8)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959963985, rel=1e-9)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959963985, rel=1e-6)
    for df in (0.7, 2.5, 37.3):
        assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-12)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0.975, 0)


def test_three_seeds_give_the_t_interval_over_seeds_which_reaches_beyond_their_range():
    """Three runs gain 0.1, 0.3 and 0.5 on every task: nothing varies across tasks, everything across seeds. A
    percentile bootstrap of the seeds could only give [0.1, 0.5] (every resample's mean lies in their range); the t
    interval over 3 seeds: 0.3 +- t(0.975, 2) * s / sqrt(3), s = 0.2 (the sample sd of 0.1, 0.3, 0.5)."""
    out = seed_interval([_runs([[0.1] * 4, [0.3] * 4, [0.5] * 4])])
    half = t_quantile(0.975, 2) * 0.2 / math.sqrt(3)  # 4.303 * 0.1155 = 0.497
    assert out["mean"] == pytest.approx(0.3) and out["ci"] == pytest.approx([0.3 - half, 0.3 + half])
    assert out["ci"][0] < 0.1 and out["ci"][1] > 0.5
    assert out["task_only_ci"] == pytest.approx([0.3, 0.3]) and out["df"] == pytest.approx(2)
    assert out["n_runs"] == [3] and out["seed_part"] == {"arm 0": "own (3 runs)"} and out["seed_part_missing"] == []


def test_one_run_gives_the_t_interval_over_tasks_and_names_its_missing_seed_part():
    """One run, per-task values 1, 0, 1, 0: mean 0.5, sample variance 1/3, so 0.5 +- t(0.975, 3) * sqrt(1/3 / 4)."""
    out = seed_interval([_runs([[1, 0, 1, 0]])], names=["teacher"])
    half = t_quantile(0.975, 3) * math.sqrt(1 / 12)
    assert out["ci"] == pytest.approx([0.5 - half, 0.5 + half]) and out["ci"] == out["task_only_ci"]
    assert out["seed_part_missing"] == ["teacher"] and out["seed_part"] == {"teacher": "missing (one run)"}


def test_a_difference_adds_both_parts_with_welch_satterthwaite_degrees_of_freedom():
    """Arm A: runs (1, 0) and (1, 0.5) on tasks a, b; arm B: (0.5, 0) twice.
    Seed part: A's run means 0.5 and 0.75 (variance 0.03125) / 2 runs = 0.015625 on 1 df; B's runs agree (0).
    Task part: per task, A's mean - B's mean = 0.5 (a) and 0.25 (b): mean 0.375, variance 0.03125, / 2 tasks =
    0.015625 on 1 df. Total 0.03125; df = 0.03125^2 / (0.015625^2 / 1 + 0.015625^2 / 1) = 2."""
    tasks = ("a", "b")
    a, b = _runs([[1, 0], [1, 0.5]], tasks), _runs([[0.5, 0], [0.5, 0]], tasks)
    out = seed_interval([a, b], names=["A", "B"])
    assert out["mean"] == pytest.approx(0.375) and out["df"] == pytest.approx(2)
    assert out["se"] == pytest.approx(math.sqrt(0.03125))
    half = t_quantile(0.975, 2) * math.sqrt(0.03125)
    assert out["ci"] == pytest.approx([0.375 - half, 0.375 + half])
    task_half = t_quantile(0.975, 1) * math.sqrt(0.015625)
    assert out["task_only_ci"] == pytest.approx([0.375 - task_half, 0.375 + task_half])
    assert seed_interval([a, b], weights=[1, 1])["mean"] == pytest.approx(0.625 + 0.25)  # a sum: A's mean + B's


def test_an_arm_with_one_run_borrows_the_pooled_run_to_run_variance_for_the_whole_figure():
    """A: one run at 0.6 everywhere; B: runs at 0.2, 0.4, 0.3 everywhere (run-mean variance 0.01 on 2 df). The
    per-task contrast is 0.3 on every task (no task part). Pooled: 0.01 * (1/1 + 1/3) on 2 df; without the pool only
    B's own 0.01 / 3 counts and A is named as missing."""
    a, b = _runs([[0.6] * 4]), _runs([[0.2] * 4, [0.4] * 4, [0.3] * 4])
    pooled = pooled_seed_variance([a, b])
    assert pooled == SeedVariance(pytest.approx(0.01), 2)
    out = seed_interval([a, b], pooled=pooled, names=["A", "B"])
    half = t_quantile(0.975, 2) * math.sqrt(0.01 * (1 + 1 / 3))
    assert out["mean"] == pytest.approx(0.3) and out["ci"] == pytest.approx([0.3 - half, 0.3 + half])
    assert out["seed_part"] == {"A": "pooled (2 df)", "B": "pooled (2 df)"} and out["seed_part_missing"] == []
    alone = seed_interval([a, b], names=["A", "B"])
    half = t_quantile(0.975, 2) * math.sqrt(0.01 / 3)
    assert alone["ci"] == pytest.approx([0.3 - half, 0.3 + half]) and alone["seed_part_missing"] == ["A"]


def test_pooled_variance_weights_arms_by_their_degrees_of_freedom():
    """Run-mean variances 0.01 (3 runs, 2 df) and 0.02 (2 runs: 0.1 apart, 1 df): (2 * 0.01 + 1 * 0.02) / 3."""
    three = _runs([[0.2] * 4, [0.4] * 4, [0.3] * 4])
    two = _runs([[0.0] * 4, [0.2] * 4])
    assert pooled_seed_variance([three, two, _runs([[0.5] * 4])]) == SeedVariance(pytest.approx(0.04 / 3), 3)
    assert pooled_seed_variance([_runs([[0.5] * 4])]) is None


def test_constant_figures_are_exact_and_bad_inputs_are_named():
    out = seed_interval([_runs([[0.25] * 4, [0.25] * 4])])
    assert out["ci"] == [0.25, 0.25] and out["df"] is None
    with pytest.raises(TaskMismatchError, match="d"):
        seed_interval([_runs([[0.1] * 4]), _runs([[0.1] * 3], ("a", "b", "c"))])
    with pytest.raises(ValueError, match="B: no run"):
        seed_interval([_runs([[0.1] * 4]), []], names=["A", "B"])
    with pytest.raises(ValueError, match="confidence"):
        seed_interval([_runs([[0.1] * 4])], confidence=95)
