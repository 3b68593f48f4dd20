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


def _approx(expected: dict) -> dict:
    """`expected` with its numbers compared to rounding (pytest.approx takes no list in a dict)."""
    return {k: v if isinstance(v, list) or v is None else pytest.approx(v) for k, v in expected.items()}


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
    # step 0 is the student scored with the run's seed: the same in every arm's run of a seed, (s, 0, 0, 0) of 4
    for s in range(3):
        start = (s, 0, 0, 0)
        _record(folder, h, "arms", f"s{s}_grpo-only", "grpo-only", {0: start, 20: (4, 2, 0, 0), 40: (4, 2, 0, 0)},
                seed=s, lr=control_lr)
        _record(folder, h, "arms", f"s{s}_opd-peer", "opd-peer", {0: start, 20: start, 40: (4,) + (s + 1,) * 3},
                seed=s, tau=0.1, step_s=[2.0 + s] * 40, teacher_kl=[0.1 * (s + 1)],
                teacher_missing_episode_frac=[0.5 + 0.2 * s])
    for s in range(2):
        _record(folder, h, "arms", f"s{s}_opd-rl-pure", "opd-rl-pure", {0: (s, 0, 0, 0), 20: (2,) * 4, 40: (2,) * 4},
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
    t3 = t_quantile(0.975, 3)
    # pass@1 of 4 attempts; seed s's student (step 0) is (s/4, 0, 0, 0) in every arm.
    # control at step 20: (1, 1/2, 0, 0) in every seed: pass1 3/8. Gains over step 0: (1 - s/4, 1/2, 0, 0), run means
    # 6/16, 5/16, 4/16: mean 5/16, seed part (1/16)^2 * 2 / 2 / 3 = 1/768 (2 df); per-task mean gains (3/4, 1/2, 0, 0),
    # deviations (7, 3, -5, -5)/16: variance 108/256/3 = 9/64, task part 9/256 = 27/768 (3 df); variance 28/768,
    # Welch-Satterthwaite df = 28^2 / (27^2 / 3 + 1 / 2) = 784 / 243.5
    control = arms["grpo-only"]
    assert control["pass1"] == pytest.approx(0.375) and control["chosen_step"] == 20 and control["seeds"] == [0, 1, 2]
    assert control["minus_student"] == pytest.approx(5 / 16)
    half = t_quantile(0.975, 784 / 243.5) * (28 / 768) ** 0.5
    assert control["minus_student_ci95"] == pytest.approx([5 / 16 - half, 5 / 16 + half])
    assert control["minus_grpo_only"] is None and control["wall_s"] == pytest.approx(20.0)
    # peer at step 40: seed s (1, (s+1)/4 x 3): pass1 7/16, 10/16, 13/16, mean 5/8. Gains (1 - s/4, (s+1)/4 x 3): run
    # means 7/16, 9/16, 11/16: mean 9/16, seed part (2/16)^2 * 2 / 2 / 3 = 4/768 (2 df); per-task mean gains
    # (3/4, 1/2, 1/2, 1/2), deviations (3, -1, -1, -1)/16: variance 12/256/3 = 1/64, task part 1/256 = 3/768 (3 df);
    # variance 7/768, df = 7^2 / (4^2 / 2 + 3^2 / 3) = 49 / 11
    peer = arms["opd-peer"]
    assert peer["pass1"] == pytest.approx(0.625) and peer["minus_student"] == pytest.approx(9 / 16)
    half = t_quantile(0.975, 49 / 11) * (7 / 768) ** 0.5
    assert peer["minus_student_ci95"] == pytest.approx([9 / 16 - half, 9 / 16 + half])
    # minus GRPO alone (its step 20), paired by seed: seed s's per-task difference peer@40 - control@20 =
    # (0, (s+1)/4 - 1/2, (s+1)/4, (s+1)/4) (the shared step 0 cancels): means 1/16, 4/16, 7/16, mean 1/4; seed part
    # (3/16)^2 * 2 / 2 / 3 = 9/768 (2 df); per-task mean differences (0, 0, 1/2, 1/2): variance 1/12, task part 1/48 =
    # 16/768 (3 df); variance 25/768, df = 25^2 / (9^2 / 2 + 16^2 / 3) = 625 / (81/2 + 256/3).
    # Unpaired (each arm's gains as independent arms) the seed part would be 4/768 + 1/768 instead of 9/768.
    half = t_quantile(0.975, 625 / (81 / 2 + 256 / 3)) * (25 / 768) ** 0.5
    assert peer["minus_grpo_only"] == pytest.approx(0.25) and peer["minus_grpo_only_seeds"] == [0, 1, 2]
    assert peer["minus_grpo_only_ci95"] == pytest.approx([0.25 - half, 0.25 + half])
    assert peer["minus_grpo_only_equal_step"]["step"] == 40  # GRPO alone at 40 is its step 20 here: the same figure
    assert peer["minus_grpo_only_equal_step"]["ci95"] == pytest.approx([0.25 - half, 0.25 + half])
    assert peer["wall_s"] == pytest.approx((2 + 3 + 4) * 40 / 3) and peer["step_s"] == pytest.approx(3.0)
    assert peer["per_seed_pass1"]["2"] == {"0": 0.125, "20": 0.125, "40": 13 / 16}
    # RL teacher, pure, at step 20: two seeds at (1/2 x 4). Gains (1/2 - s/4, 1/2, 1/2, 1/2): run means 8/16, 7/16,
    # mean 15/32, seed part (1/16)^2 / 2 / 2 = 1/1024 (1 df); per-task mean gains (3/8, 1/2, 1/2, 1/2), deviations
    # (-3, 1, 1, 1)/32: variance 12/1024/3, task part 1/1024 (3 df); variance 2/1024, df = 2^2 / (1 + 1/3) = 3
    pure = arms["opd-rl-pure"]
    assert pure["seeds"] == [0, 1] and pure["minus_student"] == pytest.approx(15 / 32)
    assert pure["minus_student_ci95"] == pytest.approx([15 / 32 - t3 * 2 ** 0.5 / 32, 15 / 32 + t3 * 2 ** 0.5 / 32])
    # paired with GRPO alone's seeds 0 and 1: (1/2 - 1, 0, 1/2, 1/2) in both: mean 1/8, no seed part; deviations
    # (-5, -1, 3, 3)/8: variance 44/64/3 = 11/48, task part 11/192 (3 df)
    half = t3 * (11 / 192) ** 0.5
    assert pure["minus_grpo_only"] == pytest.approx(1 / 8) and pure["minus_grpo_only_seeds"] == [0, 1]
    assert pure["minus_grpo_only_ci95"] == pytest.approx([1 / 8 - half, 1 / 8 + half])
    assert pure["wall_s"] == pytest.approx(60.0) and pure["recipe"]["teacher_tau"] == 1.0
    # reaching GRPO alone's pass1 (3/8 in 20 s): the peer's step 20 has 1/16 (seed means 0, 1/16, 2/16), its step 40
    # 5/8 in (2 + 3 + 4) * 40 / 3 = 120 s, 6x; the pure arm's step 20 has 1/2 in 60 s, 3x
    assert peer["reaches_grpo_only"] == _approx(
        {"pass1_target": 0.375, "step": 40, "pass1": 0.625, "wall_s": 120.0, "wall_fraction": 6.0, "seeds": [0, 1, 2]})
    assert pure["reaches_grpo_only"] == _approx(
        {"pass1_target": 0.375, "step": 20, "pass1": 0.5, "wall_s": 60.0, "wall_fraction": 3.0, "seeds": [0, 1]})
    assert "reaches_grpo_only" not in control


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
    kept = out.parent / "lr5e-05_tau0.1"  # in the sweep, never run here (kept from a committed record): no record
    kept.mkdir()
    (kept / "config.yaml").write_text(yaml.safe_dump(config))  # what the sweep's dry run leaves
    manifest = {"runs": [{"name": out.name, "variant": None, "config": str(out / "config.yaml"),
                          "output_dir": str(out)},
                         {"name": kept.name, "variant": None, "config": str(kept / "config.yaml"),
                          "output_dir": str(kept)}]}
    (out.parent / "sweep_manifest.json").write_text(json.dumps(manifest))
    written = opd_records.write_records(tmp_path / "work", "validation", tmp_path / "opd")
    assert written == [tmp_path / "opd" / "validation" / "opd-peer" / "lr2e-05_tau0.1.json"]
    record = json.loads(written[0].read_text())
    assert record["passes"] == {"20": {tasks[0].id: 2, tasks[1].id: 0, tasks[2].id: 0}}
    assert record["incomplete_steps"] == [40] and record["arm"] == "opd-peer" and not record["finished"]
    assert record["per_step"]["step_s"] == [3.0, 4.0] and record["per_step"]["teacher_kl"] == [0.5, None]
    # a lost machine's work, unpacked elsewhere (the manifest's paths are the machine's): the same record
    (tmp_path / "work").rename(tmp_path / "unpacked")
    moved = opd_records.write_records(tmp_path / "unpacked", "validation", tmp_path / "opd-moved")
    assert [json.loads(p.read_text()) for p in moved] == [record]
    # ... also where the manifest's path holds another (older) tree: the copied run's files win
    (out / "eval_arc").mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump({**config, "learning_rate": 9.0}))
    moved = opd_records.write_records(tmp_path / "unpacked", "validation", tmp_path / "opd-stale")
    assert [json.loads(p.read_text()) for p in moved] == [record]

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
    queue_log = Path("lab/logs/gpu_learning_smollm2/machine1_queue.log")  # the GPU and the versions
    (tmp_path / queue_log).parent.mkdir(parents=True)
    shutil.copy(root / queue_log, tmp_path / queue_log)
    shutil.rmtree(tmp_path / smollm2.FOLDER / "opd")  # the committed records (validation only) give way to a whole run
    without = smollm2.summary(tmp_path)
    assert not {"arms", "teacher_gaps"} & set(without)  # no records: the summary of the first experiment alone
    _experiment(tmp_path / smollm2.FOLDER / "opd")
    summary = smollm2.summary(tmp_path)
    assert {k: v for k, v in summary.items() if k not in without} == opd_report.summary(  # arms, teacher_gaps, ...
        tmp_path / smollm2.FOLDER / "opd")


def test_teachers_of_machines_that_split_the_seeds_are_averaged_and_each_kept(tmp_path):
    """Two held-out machines, two RL-trained teachers: the gap is their mean, its interval over tasks and teachers."""
    import copy

    root = Path(__file__).resolve().parents[3]
    teacher = json.loads((root / "results/gpu_learning_smollm2/opd/validation/teacher/rl-teacher.json").read_text())
    other = copy.deepcopy(teacher)
    other["run"] = "rl-teacher-s1-2"
    flipped = 0
    for task, passed in other["passes"]["128"].items():  # the second teacher passes one more attempt on 20 tasks
        if passed < 4 and flipped < 20:
            other["passes"]["128"][task], flipped = passed + 1, flipped + 1
    teacher["run"] = "rl-teacher-s0"
    gaps = opd_report._gaps({"teacher": {"rl-teacher-s0": teacher, "rl-teacher-s1-2": other}}, "heldout")["opd-rl"]
    one = opd_report._gaps({"teacher": {"rl-teacher-s0": teacher}}, "heldout")["opd-rl"]
    tasks = len(teacher["passes"]["0"])
    assert gaps["teacher_minus_student"] == pytest.approx(one["teacher_minus_student"] + 0.5 * 20 / 4 / tasks)
    assert sorted(gaps["teachers"]) == ["rl-teacher-s0", "rl-teacher-s1-2"] and "teachers" not in one
    assert gaps["teachers"]["rl-teacher-s0"]["teacher_minus_student"] == pytest.approx(one["teacher_minus_student"])
    lo, hi = gaps["teacher_minus_student_ci95"]
    assert lo < gaps["teacher_minus_student"] < hi


def test_shifts_by_task_family_show_where_an_arm_gains_or_loses(tmp_path, monkeypatch):
    """Synthetic task ids name their family (syn-FAMILY-SEED-INDEX): each difference is also given per family."""
    import sys

    monkeypatch.setattr(sys.modules[__name__], "TASKS", ("syn-rotate-1-0", "syn-rotate-1-1", "syn-flip-1-0",
                                                          "syn-flip-1-1"))
    _experiment(tmp_path)
    s = opd_report.summary(tmp_path)
    assert opd_report.task_family("syn-mirror_concat-4-12") == "mirror_concat" and opd_report.task_family(
        "007bbfb7") == "other"
    # peer@40 - control@20 per seed: (0, (s+1)/4 - 1/2, (s+1)/4, (s+1)/4): rotate (0 + (s-1)/4) / 2, mean over seeds 0;
    # flip (s+1)/4, mean 1/2
    assert s["arms"]["opd-peer"]["minus_grpo_only_by_family"] == pytest.approx({"flip": 0.5, "rotate": 0.0})
    # control's gains over step 0: (1 - s/4, 1/2, 0, 0): rotate (3/4 + 1/2) / 2 over seeds = 5/8, flip 0
    assert s["arms"]["grpo-only"]["minus_student_by_family"] == pytest.approx({"flip": 0.0, "rotate": 0.625})
    # the held-out teacher: (2, 0, 0, 0) -> (4, 4, 4, 0) of 4: rotate (1/2 + 1) / 2, flip (1 + 0) / 2
    assert s["teacher_gaps"]["opd-rl"]["teacher_minus_student_by_family"] == pytest.approx({"flip": 0.5, "rotate": 0.75})


def test_teachers_evaluated_at_different_steps_are_not_averaged(tmp_path):
    _record(tmp_path, "heldout", "teacher", "rl-teacher-s0", "rl-teacher", {0: (2, 0, 0, 0), 128: (4, 4, 4, 0)})
    _record(tmp_path, "heldout", "teacher", "rl-teacher-s1-2", "rl-teacher", {0: (2, 0, 0, 0), 64: (4, 4, 0, 0)})
    groups = opd_records.read_records(tmp_path)["heldout"]
    with pytest.raises(ValueError, match=r"different steps.*'rl-teacher-s1-2': \['0', '64'\].*stopped early"):
        opd_report._gaps(groups, "heldout")


def test_the_write_command_names_the_teacher_record_and_logs_arms_without_an_evaluation(tmp_path, capsys):
    """A held-out machine of some seeds names its teacher's record; a validation machine whose every run of an arm was
    lost logs it (it raised before: 'no evaluated run', 2026-11-28's queue a)."""
    for group, run in (("teacher", "rl-teacher"), ("validation/opd-rl-pure", "lr2e-05")):
        out = tmp_path / "work" / group / run
        out.mkdir(parents=True)
        (out / "config.yaml").write_text(yaml.safe_dump({"seed": 0}))
        (out / "trainer_state.json").write_text(json.dumps({"log_history": []}))
        manifest = {"runs": [{"name": run, "variant": None, "config": str(out / "config.yaml"),
                              "output_dir": str(out)}]}
        (out.parent / "sweep_manifest.json").write_text(json.dumps(manifest))
    opd = tmp_path / "opd"
    opd_records.save_record({"run": "rl-teacher-s1-2", "group": "teacher", "exit_code": 0, "neighbours": []}, opd,
                            "heldout")  # the queue's record of the run as it ended
    assert opd_records.main(["write", str(tmp_path / "work"), "--part", "heldout", "--out", str(opd),
                             "--teacher-run", "rl-teacher-s1-2"]) == 0
    assert [p.name for p in (opd / "heldout" / "teacher").iterdir()] == ["rl-teacher-s1-2.json"]
    record = json.loads((opd / "heldout" / "teacher" / "rl-teacher-s1-2.json").read_text())
    assert record["run"] == "rl-teacher-s1-2" and record["exit_code"] == 0 and record["finished"] is False
    assert opd_records.main(["write", str(tmp_path / "work"), "--part", "validation", "--out", str(opd)]) == 0
    assert "opd-rl-pure   no evaluated run here" in capsys.readouterr().out


def test_show_prints_each_runs_pass1_by_step_and_its_teacher_figures(tmp_path, capsys):
    _experiment(tmp_path)
    assert opd_records.main(["show", str(tmp_path)]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    # s1_opd-peer: step 0 (1, 0, 0, 0) of 4 -> 1/16; step 40 (4, 2, 2, 2) -> 10/16; teacher_kl [0.2]; missing [0.7]
    assert rows["heldout/arms/s1_opd-peer"] == ["done", "0:", "6.2", "20:", "6.2", "40:", "62.5", "0.2000", "0.7000",
                                               "1.0"]
    assert rows["heldout/arms/s1_grpo-only"][-3:] == ["-", "-", "1.0"]  # no teacher term logged
    assert len(rows) == 14  # 5 validation records, 9 held-out
    # a run cut before its first evaluation, steps without a teacher figure (None), no exit code from the queue
    _record(tmp_path, "heldout", "arms", "s3_opd-peer", "opd-peer", {}, teacher_kl=[None, 0.3, 0.1])
    record = json.loads((tmp_path / "heldout" / "arms" / "s3_opd-peer.json").read_text())
    (tmp_path / "heldout" / "arms" / "s3_opd-peer.json").write_text(json.dumps({**record, "finished": False,
                                                                             "exit_code": None}))
    assert opd_records.main(["show", str(tmp_path)]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["heldout/arms/s3_opd-peer"] == ["cut", "-", "0.2000", "-", "1.0"]
    assert opd_records.main(["show", str(tmp_path / "none")]) == 1


def test_an_arm_that_never_reaches_grpo_alone_has_no_step_and_one_without_step_times_is_named():
    per_task = {0: {0: {"a": 0.0}, 20: {"a": 0.25}, 40: {"a": 0.5}}, 1: {0: {"a": 0.0}, 20: {"a": 0.5}, 40: {"a": 0.5}}}
    times = {0: [1.0] * 40, 1: [2.0] * 40}
    never = opd_report.reaches(per_task, times, target=0.75, control_wall_s=10.0)
    assert never == {"pass1_target": 0.75, "step": None, "pass1": None, "wall_s": None, "wall_fraction": None,
                     "seeds": None}
    # step 20's mean 3/8 reaches 3/8 (at least, not above): 20 s and 40 s, mean 30 s of the control's 10 s
    assert opd_report.reaches(per_task, times, target=0.375, control_wall_s=10.0) == _approx(
        {"pass1_target": 0.375, "step": 20, "pass1": 0.375, "wall_s": 30.0, "wall_fraction": 3.0, "seeds": [0, 1]})
    # a target above the mean by rounding only is reached: (0.1 + 0.2) / 2 is 0.15000000000000002
    assert opd_report.reaches({0: {20: {"a": 0.1, "b": 0.2}}}, {0: [1.0] * 20}, target=0.15000000000000005,
                              control_wall_s=20.0)["step"] == 20
    for times in ({0: [1.0] * 10, 1: [2.0] * 40}, {0: [1.0] * 40, 1: [2.0] * 19 + [None] * 21}):
        with pytest.raises(ValueError, match="step times of steps 1-20"):
            opd_report.reaches(per_task, times, target=0.375, control_wall_s=10.0)
    # a seed cut after step 20 drops out of step 40, not the whole arm: step 40 from seed 1 alone (1/2 in 80 s)
    cut = {0: {0: {"a": 0.0}, 20: {"a": 0.0}}, 1: {0: {"a": 0.0}, 20: {"a": 0.0}, 40: {"a": 0.5}}}
    assert opd_report.reaches(cut, step_s={0: [1.0] * 20, 1: [2.0] * 40}, target=0.5, control_wall_s=40.0) == \
        _approx({"pass1_target": 0.5, "step": 40, "pass1": 0.5, "wall_s": 80.0, "wall_fraction": 2.0, "seeds": [1]})
