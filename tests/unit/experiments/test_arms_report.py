"""The learning result's summary from an arms run (arc_experiments/learning/arms_report.py): per-seed pass@1 per step,
gains over each run's own start, and intervals that resample seeds as well as tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from arc_experiments.learning import arms_report
from arc_trl.tasks import load_tasks

HELDOUT = "synthetic:n=6,seed=1,difficulty=tiny,families=flip"


def _run(arms_dir: Path, arm: str, seed: int, solved: dict[int, int]) -> dict:
    """A run of `arm` whose evaluation at each step solved the first `solved[step]` tasks (both attempts)."""
    out = arms_dir / f"s{seed}_{arm}"
    (out / "eval_arc").mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"eval_dataset": HELDOUT, "seed": seed}))
    tasks = load_tasks(HELDOUT)
    for step, n in solved.items():
        with open(out / "eval_arc" / f"step_{step:06d}.jsonl", "w") as f:
            for i, task in enumerate(tasks):
                for attempt in range(2):
                    right = [g.tolist() if hasattr(g, "tolist") else g for g in task.test_outputs]
                    f.write(json.dumps({"task_id": task.id, "attempt": attempt, "step": step,
                                        "outcome": {"test_predictions": right if i < n else None}}) + "\n")
    return {"name": out.name, "variant": arm, "config": str(out / "config.yaml"), "output_dir": str(out)}


def test_summary_has_per_seed_values_own_start_gains_and_seed_aware_intervals(tmp_path):
    runs = [_run(tmp_path, "grpo-only", s, {0: 2, 20: 3, 40: 3 + (s == 0)}) for s in range(3)]
    runs += [_run(tmp_path, "grpo-opd", s, {0: 2, 20: 2, 40: 4 + (s == 2)}) for s in range(3)]
    (tmp_path / "sweep_manifest.json").write_text(json.dumps({"name": "arms", "runs": runs}))
    summary = arms_report.summarize(arms_report.load_arms(tmp_path), {"grpo-only": 20, "grpo-opd": 40},
                                    n_resamples=2000)
    assert summary["seeds"] == [0, 1, 2] and summary["heldout_tasks"] == 6
    assert summary["student_pass1"] == pytest.approx(2 / 6)
    assert summary["per_seed_pass1"]["grpo-opd"]["2"] == {"0": round(2 / 6, 4), "20": round(2 / 6, 4),
                                                          "40": round(5 / 6, 4)}
    assert summary["grpo_only_pass1"] == pytest.approx(3 / 6)
    assert summary["grpo_opd_pass1"] == pytest.approx((4 + 4 + 5) / 18)
    opd = summary["grpo_opd_minus_student"]
    assert opd["mean"] == pytest.approx((4 + 4 + 5) / 18 - 2 / 6) and opd["n_seeds"] == [3, 0]
    # seed 2 differs, so resampling seeds widens the interval beyond the tasks alone: it must cover both extremes'
    # seed-only means (every seed 4 -> +2/6, every seed 5 -> +3/6) as possible resample values
    assert opd["ci95"][0] < opd["mean"] < opd["ci95"][1]
    versus = summary["grpo_opd_minus_grpo_only"]
    assert versus["mean"] == pytest.approx(((4 + 4 + 5) / 18 - 2 / 6) - (3 / 6 - 2 / 6))
    equal = summary["grpo_opd_minus_grpo_only_equal_steps"]
    assert sorted(equal) == ["20", "40"]
    assert equal["20"]["mean"] == pytest.approx(-1 / 6) and equal["20"]["ci95"][1] <= 0  # opd solved fewer at 20
    assert equal["40"]["mean"] == pytest.approx((13 - 10) / 18)


def test_an_arm_without_runs_or_a_chosen_step_is_named(tmp_path):
    runs = [_run(tmp_path, "grpo-only", 0, {0: 1, 40: 2})]
    (tmp_path / "sweep_manifest.json").write_text(json.dumps({"name": "arms", "runs": runs}))
    with pytest.raises(SystemExit, match="grpo-opd"):
        arms_report.summarize(arms_report.load_arms(tmp_path), {"grpo-only": 40, "grpo-opd": 40})


def test_command_line_writes_the_summary(tmp_path):
    runs = [_run(tmp_path, arm, s, {0: 1, 40: 3}) for arm in ("grpo-only", "grpo-opd") for s in range(3)]
    (tmp_path / "sweep_manifest.json").write_text(json.dumps({"name": "arms", "runs": runs}))
    assert arms_report.main([str(tmp_path), "--chosen-steps", "grpo-only=40", "grpo-opd=40",
                             "--out", str(tmp_path / "s.json")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["grpo_opd_minus_grpo_only"]["ci95"] == [0.0, 0.0]  # identical arms: exactly zero
