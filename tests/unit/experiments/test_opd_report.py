"""Issue 41's records and figures (arc_experiments/learning/opd_records.py, opd_report.py) on synthetic runs whose
numbers are derived by hand below: the validation choice (ties to the fewer steps), each arm's held-out pass@1, gains
over the student and over GRPO alone with seed-aware intervals, wall-clock, and the teachers' gaps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from arc_experiments.learning import opd_records, opd_report
from arc_experiments.learning.student_t import t_quantile
from arc_trl.tasks import load_tasks

TASKS = ("a", "b", "c", "d")


def _record(folder: Path, part: str, group: str, run: str, arm: str, passes: dict[int, tuple[int, ...]],
            seed: int = 0, lr: float = 2e-5, tau: float = 0.0, **per_step: list[float]) -> None:
    """A run record: `passes[step]` = passed attempts (of 4) of tasks a, b, c, d."""
    recipe = {k: None for k in opd_records.RECIPE_KEYS} | {"learning_rate": lr, "teacher_tau": tau, "seed": seed}
    record = {"run": run, "group": group, "arm": arm, "seed": seed, "recipe": recipe, "dataset": "d", "attempts": 4,
              "passes": {str(s): dict(zip(TASKS, p)) for s, p in passes.items()}, "incomplete_steps": [],
              "per_step": {"step_s": [1.0] * 40, **per_step}, "finished": True, "seconds": 1.0}
    path = folder / part / group / f"{run}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))


def _experiment(folder: Path, control_lr: float = 5e-5) -> None:
    v = "validation"
    # control: lr 2e-5 reaches 0.5 at step 40, lr 5e-5 at step 20: a tie, which goes to the fewer steps
    _record(folder, v, "grpo-only", "lr2e-05", "grpo-only", {20: (4, 0, 0, 0), 40: (4, 4, 0, 0)})
    _record(folder, v, "grpo-only", "lr5e-05", "grpo-only", {20: (4, 4, 0, 0), 40: (4, 0, 0, 0)}, lr=5e-5)
    _record(folder, v, "opd-peer", "lr2e-05_tau0.1", "opd-peer", {20: (4, 0, 0, 0), 40: (4, 4, 4, 0)}, tau=0.1,
            teacher_kl=[0.05], teacher_missing_episode_frac=[0.6])
    _record(folder, v, "opd-rl-pure", "lr2e-05", "opd-rl-pure", {20: (4, 4, 0, 0), 40: (4, 0, 0, 0)}, tau=1.0,
            teacher_kl=[0.9])
    _record(folder, v, "teacher", "rl-teacher", "rl-teacher", {0: (0, 0, 0, 0), 128: (4, 0, 0, 0)}, lr=5e-5)
    h = "heldout"
    for s in range(3):
        _record(folder, h, "arms", f"s{s}_grpo-only", "grpo-only", {0: (2, 0, 0, 0), 20: (4, 2, 0, 0), 40: (4, 2, 0, 0)},
                seed=s, lr=control_lr)
        _record(folder, h, "arms", f"s{s}_opd-peer", "opd-peer", {0: (0,) * 4, 20: (0,) * 4, 40: (s + 1,) * 4},
                seed=s, tau=0.1, step_s=[2.0 + s] * 40, teacher_kl=[0.1 * (s + 1)],
                teacher_missing_episode_frac=[0.5 + 0.2 * s])
    for s in range(2):
        _record(folder, h, "arms", f"s{s}_opd-rl-pure", "opd-rl-pure", {0: (0,) * 4, 20: (2,) * 4, 40: (2,) * 4},
                seed=s, tau=1.0, step_s=[3.0] * 40, teacher_kl=[0.2 + 0.2 * s])
    _record(folder, h, "teacher", "rl-teacher", "rl-teacher", {0: (2, 0, 0, 0), 128: (4, 4, 4, 0)}, lr=5e-5,
            step_s=[1.5] * 128)


def test_each_arm_against_the_student_and_grpo_alone_at_its_validation_chosen_step(tmp_path):
    _experiment(tmp_path)
    s = opd_report.summary(tmp_path)
    assert {a: (c["run"], c["step"]) for a, c in s["opd_recipes"].items()} == {
        "grpo-only": ("lr5e-05", 20), "opd-peer": ("lr2e-05_tau0.1", 40), "opd-rl-pure": ("lr2e-05", 20)}
    arms = s["arms"]
    assert list(arms) == ["grpo-only", "opd-peer", "opd-rl-pure"]
    t3, t2 = t_quantile(0.975, 3), t_quantile(0.975, 2)
    # control at step 20: per-task gains over step 0 (0.5, 0.5, 0, 0) in every seed: mean 1/4, no seed part; variance
    # over tasks 1/12, task part 1/48 on 3 df
    control = arms["grpo-only"]
    assert control["pass1"] == pytest.approx(0.375) and control["chosen_step"] == 20 and control["seeds"] == [0, 1, 2]
    assert control["minus_student"] == pytest.approx(0.25)
    assert control["minus_student_ci95"] == pytest.approx([0.25 - t3 / 48 ** 0.5, 0.25 + t3 / 48 ** 0.5])
    assert control["minus_grpo_only"] is None and control["wall_s"] == pytest.approx(20.0)
    # peer at step 40: seed s gains (s+1)/4 on every task: run means 1/4, 1/2, 3/4 (variance 1/16, seed part 1/48 on
    # 2 df), no task part
    peer = arms["opd-peer"]
    assert peer["pass1"] == pytest.approx(0.5) and peer["minus_student"] == pytest.approx(0.5)
    assert peer["minus_student_ci95"] == pytest.approx([0.5 - t2 / 48 ** 0.5, 0.5 + t2 / 48 ** 0.5])
    # minus GRPO alone (its step 20): per-task contrast (0, 0, 1/2, 1/2), mean 1/4, task part 1/48 (3 df) + the peer's
    # seed part 1/48 (2 df): variance 1/24, Welch-Satterthwaite df = (2/48)^2 / ((1/48)^2 / 3 + (1/48)^2 / 2) = 4.8
    half = t_quantile(0.975, 4.8) / 24 ** 0.5
    assert peer["minus_grpo_only"] == pytest.approx(0.25)
    assert peer["minus_grpo_only_ci95"] == pytest.approx([0.25 - half, 0.25 + half])
    assert peer["minus_grpo_only_equal_step"]["step"] == 40  # GRPO alone at 40 is its step 20 here: the same figure
    assert peer["minus_grpo_only_equal_step"]["ci95"] == pytest.approx([0.25 - half, 0.25 + half])
    assert peer["wall_s"] == pytest.approx((2 + 3 + 4) * 40 / 3) and peer["step_s"] == pytest.approx(3.0)
    assert peer["per_seed_pass1"]["2"] == {"0": 0.0, "20": 0.0, "40": 0.75}
    # RL teacher, pure: two seeds, both gain 1/2 on every task: no variance at all; against GRPO alone the control's
    # task part alone
    pure = arms["opd-rl-pure"]
    assert pure["seeds"] == [0, 1] and pure["minus_student_ci95"] == pytest.approx([0.5, 0.5])
    assert pure["minus_grpo_only_ci95"] == pytest.approx([0.25 - t3 / 48 ** 0.5, 0.25 + t3 / 48 ** 0.5])
    assert pure["wall_s"] == pytest.approx(60.0) and pure["recipe"]["teacher_tau"] == 1.0


def test_teacher_gaps_come_from_the_heldout_machine_with_the_validation_machines_beside(tmp_path):
    _experiment(tmp_path)
    gaps = opd_report.summary(tmp_path)["teacher_gaps"]
    rl = gaps["opd-rl"]
    # the teacher's own run: step 0 (the student) 1/8, step 128 3/4; per-task gains (1/2, 1, 1, 0): mean 5/8, sample
    # variance 11/48, task part 11/192 on 3 df (one run: no seed part)
    assert rl["teacher_steps"] == 128 and rl["student_pass1"] == pytest.approx(0.125)
    assert rl["teacher_pass1"] == pytest.approx(0.75) and rl["teacher_minus_student"] == pytest.approx(0.625)
    half = t_quantile(0.975, 3) * (11 / 192) ** 0.5
    assert rl["teacher_minus_student_ci95"] == pytest.approx([0.625 - half, 0.625 + half])
    assert rl["teacher_wall_s"] == pytest.approx(192.0) and rl["measured_on"] == "heldout"
    assert rl["teacher_kl_step1"] == pytest.approx(0.3)  # the two rl-pure runs' step 1: 0.2 and 0.4
    assert rl["validation_machine"]["teacher_pass1"] == pytest.approx(0.25)
    assert rl["validation_machine"]["teacher_kl_step1"] == pytest.approx(0.9)
    peer = gaps["opd-peer"]
    assert peer["teacher_kl_step1"] == pytest.approx(0.2)
    assert peer["teacher_missing_episode_frac_step1"] == pytest.approx(0.7)
    assert peer["validation_machine"]["teacher_missing_episode_frac_step1"] == pytest.approx(0.6)


def test_a_validation_only_folder_gives_recipes_and_gaps_and_a_heldout_run_off_its_recipe_is_named(tmp_path):
    _experiment(tmp_path / "full", control_lr=2e-5)
    with pytest.raises(ValueError, match=r"s0_grpo-only ran \{'learning_rate': 2e-05\}, not the validation choice"):
        opd_report.summary(tmp_path / "full")
    _experiment(tmp_path / "v")
    for path in (tmp_path / "v" / "heldout").rglob("*.json"):
        path.unlink()
    s = opd_report.summary(tmp_path / "v")
    assert "arms" not in s and s["teacher_gaps"]["opd-rl"]["measured_on"] == "validation"
    assert s["teacher_gaps"]["opd-rl"]["teacher_minus_student"] == pytest.approx(0.25)


def test_records_from_a_runs_files_and_the_heldout_sweep_file_from_the_choices(tmp_path):
    dataset = "synthetic:n=3,seed=1,difficulty=tiny,families=flip"
    tasks = load_tasks(dataset)
    out = tmp_path / "work" / "validation" / "opd-peer" / "lr2e-05_tau0.1"
    (out / "eval_arc").mkdir(parents=True)
    config = {"eval_dataset": dataset, "eval_n_predictions": 2, "seed": 0, "learning_rate": 2e-5, "teacher_tau": 0.1}
    (out / "config.yaml").write_text(yaml.safe_dump(config))
    for step, solved in ((20, 1), (40, 2)):
        with open(out / "eval_arc" / f"step_{step:06d}.jsonl", "w") as f:
            for i, task in enumerate(tasks):
                for attempt in range(2 if step == 20 or i else 1):  # step 40: task 0 has one attempt of two
                    right = [g.tolist() if hasattr(g, "tolist") else g for g in task.test_outputs]
                    f.write(json.dumps({"task_id": task.id, "attempt": attempt,
                                        "outcome": {"test_predictions": right if i < solved else None}}) + "\n")
    logs = [{"step": 2, "time/step": 4.0}, {"step": 1, "time/step": 3.0, "teacher_kl": 0.5}, {"step": 2, "eval": 1}]
    (out / "trainer_state.json").write_text(json.dumps({"log_history": logs}))
    manifest = {"runs": [{"name": out.name, "variant": None, "config": str(out / "config.yaml"),
                          "output_dir": str(out)}]}
    (out.parent / "sweep_manifest.json").write_text(json.dumps(manifest))
    written = opd_records.write_records(tmp_path / "work", "validation", tmp_path / "opd")
    assert written == [tmp_path / "opd" / "validation" / "opd-peer" / "lr2e-05_tau0.1.json"]
    record = json.loads(written[0].read_text())
    assert record["passes"] == {"20": {tasks[0].id: 2, tasks[1].id: 0, tasks[2].id: 0}}
    assert record["incomplete_steps"] == [40] and record["arm"] == "opd-peer" and not record["finished"]
    assert record["per_step"]["step_s"] == [3.0, 4.0] and record["per_step"]["teacher_kl"] == [0.5, None]

    _experiment(tmp_path / "records")
    choices = {arm: opd_records.choose(runs) for arm, runs in
               opd_records.read_records(tmp_path / "records")["validation"].items() if arm != "teacher"}
    template = Path(__file__).resolve().parents[3] / "configs" / "gpu" / "smollm2" / "opd-heldout.yaml"
    with pytest.raises(SystemExit, match=r"no validation choice for \['opd-rl-mixed'\]"):
        opd_records.arms_file(template, choices, tmp_path / "arms.yaml")
    choices["opd-rl-mixed"] = {"recipe": {"learning_rate": 5e-5, "teacher_tau": 1.0}}
    sweep = opd_records.arms_file(template, choices, tmp_path / "arms.yaml")
    variants = {v["name"]: v for v in yaml.safe_load((tmp_path / "arms.yaml").read_text())["variants"]}
    assert variants == {v["name"]: v for v in sweep["variants"]}
    assert (variants["grpo-only"]["learning_rate"], variants["grpo-only"]["teacher_tau"]) == (5e-5, 0.0)
    assert (variants["opd-rl-mixed"]["learning_rate"], variants["opd-rl-mixed"]["teacher_tau"]) == (5e-5, 1.0)
    assert variants["opd-rl-pure"]["adv_tau"] == 0.0 and variants["opd-peer"]["teacher_privileged"] == "peer"


def test_the_smollm2_summary_carries_the_figures_once_the_records_are_committed(tmp_path):
    import shutil

    from arc_experiments.figures import smollm2

    root = Path(__file__).resolve().parents[3]
    for folder in (smollm2.FOLDER, smollm2.CONFIGS):
        shutil.copytree(root / folder, tmp_path / folder)
    without = smollm2.summary(tmp_path)
    assert not {"arms", "teacher_gaps"} & set(without)  # no records: the committed summary as it is
    _experiment(tmp_path / smollm2.FOLDER / "opd")
    summary = smollm2.summary(tmp_path)
    assert {k: v for k, v in summary.items() if k not in without} == opd_report.summary(  # arms, teacher_gaps, ...
        tmp_path / smollm2.FOLDER / "opd")
