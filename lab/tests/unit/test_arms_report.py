"""The learning result's summary from an arms run (arc_experiments/learning/arms_report.py): per-seed pass@1 per step,
gains over each run's own start, seed-aware t intervals (derived by hand below), and the held-out check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from arc_experiments.learning import arms_report
from arc_experiments.learning.student_t import t_quantile
from arc_trl.tasks import load_tasks

HELDOUT = "synthetic:n=6,seed=1,difficulty=tiny,families=flip"


def _configs(tmp_path: Path, rl: str = "synthetic:n=6,seed=2,difficulty=tiny,families=flip") -> Path:
    """An experiment's configs folder: the SFT and RL sets the held-out check compares the held-out set with."""
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "sft-student.yaml").write_text(yaml.safe_dump({"dataset": "synthetic:n=6,seed=0,difficulty=tiny,"
                                                                         "families=flip"}))
    (configs / "grpo-opd.yaml").write_text(yaml.safe_dump({"dataset": rl, "max_steps": 40}))
    (configs / "profile.yaml").write_text(yaml.safe_dump({"teachers": {}}))
    return configs


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
    summary = arms_report.summarize(arms_report.load_arms(tmp_path), {"grpo-only": 20, "grpo-opd": 40})
    assert summary["seeds"] == [0, 1, 2] and summary["heldout_tasks"] == 6
    assert summary["student_pass1"] == pytest.approx(2 / 6)
    assert summary["per_seed_pass1"]["grpo-opd"]["2"] == {"0": round(2 / 6, 4), "20": round(2 / 6, 4),
                                                          "40": round(5 / 6, 4)}
    assert summary["grpo_only_pass1"] == pytest.approx(3 / 6)
    assert summary["grpo_opd_pass1"] == pytest.approx((4 + 4 + 5) / 18)
    opd = summary["grpo_opd_minus_student"]
    # by hand: the seeds' gains at step 40 are 2/6, 2/6, 3/6 (run means 1/3, 1/3, 1/2: variance 1/108, seed part
    # 1/108 / 3 = 1/324 on 2 df); per task, the gain averaged over seeds is 0, 0, 1, 1, 1/3, 0 (mean 7/18, variance
    # 78/324, task part 78/324 / 6 = 13/324 on 5 df); Welch-Satterthwaite df = (14/324)^2 / ((13/324)^2 / 5 +
    # (1/324)^2 / 2) = 196 / 34.3
    assert opd["mean"] == pytest.approx(7 / 18) and opd["n_seeds"] == [3]
    half = t_quantile(0.975, 196 / 34.3) * (14 / 324) ** 0.5
    assert opd["df"] == pytest.approx(196 / 34.3)
    assert opd["ci95"] == pytest.approx([7 / 18 - half, 7 / 18 + half])
    assert opd["task_only_ci95"] == pytest.approx([7 / 18 - t_quantile(0.975, 5) * (13 / 324) ** 0.5,
                                                   7 / 18 + t_quantile(0.975, 5) * (13 / 324) ** 0.5])
    versus = summary["grpo_opd_minus_grpo_only"]
    assert versus["mean"] == pytest.approx(((4 + 4 + 5) / 18 - 2 / 6) - (3 / 6 - 2 / 6))
    equal = summary["grpo_opd_minus_grpo_only_equal_steps"]
    assert sorted(equal) == ["20", "40"]
    # at step 20 GRPO + OPD gains nothing and GRPO alone solves task 2 in every seed: no seed part, and the per-task
    # difference 0, 0, -1, 0, 0, 0 has variance 1/6, so the interval is -1/6 +- t(5) * sqrt(1/36): one task of six
    # does not exclude zero
    assert equal["20"]["mean"] == pytest.approx(-1 / 6)
    assert equal["20"]["ci95"] == pytest.approx([-1 / 6 - t_quantile(0.975, 5) / 6, -1 / 6 + t_quantile(0.975, 5) / 6])
    assert equal["40"]["mean"] == pytest.approx((13 - 10) / 18)


def test_an_arm_without_runs_or_a_chosen_step_is_named(tmp_path):
    runs = [_run(tmp_path, "grpo-only", 0, {0: 1, 40: 2})]
    (tmp_path / "sweep_manifest.json").write_text(json.dumps({"name": "arms", "runs": runs}))
    with pytest.raises(SystemExit, match="grpo-opd"):
        arms_report.summarize(arms_report.load_arms(tmp_path), {"grpo-only": 40, "grpo-opd": 40})


def test_command_line_writes_the_summary(tmp_path):
    runs = [_run(tmp_path, arm, s, {0: 1, 40: 3}) for arm in ("grpo-only", "grpo-opd") for s in range(3)]
    configs = _configs(tmp_path)
    manifest = {"name": "arms", "base_config": str(configs / "grpo-opd.yaml"), "runs": runs}
    (tmp_path / "sweep_manifest.json").write_text(json.dumps(manifest))
    assert arms_report.main([str(tmp_path), "--chosen-steps", "grpo-only=40", "grpo-opd=40",
                             "--out", str(tmp_path / "s.json")]) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["grpo_opd_minus_grpo_only"]["ci95"] == [0.0, 0.0]  # identical arms: exactly zero
    # the held-out check ran against the configs folder of the sweep's base config, and found nothing
    assert summary["heldout_check"]["heldout"] == HELDOUT and summary["heldout_never_trained_on"] is True
    assert summary["heldout_check"]["overlap"] == {"sft-student": [], "rl": []}


def test_a_heldout_task_in_the_rl_set_is_recorded_and_fails_the_command(tmp_path, capsys):
    runs = [_run(tmp_path, arm, s, {0: 1, 40: 3}) for arm in ("grpo-only", "grpo-opd") for s in range(2)]
    (tmp_path / "sweep_manifest.json").write_text(json.dumps({"name": "arms", "runs": runs}))
    configs = _configs(tmp_path, rl=HELDOUT)  # RL on the held-out tasks themselves
    assert arms_report.main([str(tmp_path), "--chosen-steps", "grpo-only=40", "grpo-opd=40", "--configs",
                             str(configs), "--out", str(tmp_path / "s.json")]) == 1
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["heldout_never_trained_on"] is False and len(summary["heldout_check"]["overlap"]["rl"]) == 6
    assert "6 held-out task(s) also in rl" in capsys.readouterr().err
