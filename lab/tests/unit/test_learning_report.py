"""The learning experiment's statistics (arc_experiments/learning/report.py) on a synthetic results.json: the summary JSON
of issue 26, the pass@1-over-steps curves, the CI tables, merging machines' results, and demo_learning's report."""

from __future__ import annotations

import json

import pytest

from arc_experiments.learning.merge import merge_results
from arc_experiments.learning.report import REQUIRED_KEYS, ci_block, summary, write_summary
from arc_experiments.learning.student_t import t_quantile

T1 = t_quantile(0.975, 1)  # 12.71: a seed part from two runs has one degree of freedom

TASKS = [f"syn-flip-1-{i:03d}" for i in range(40)]


def _eval(value, n_attempts=4, **per_task_override):
    per_task = {t: value for t in TASKS}
    per_task.update(per_task_override)
    rate = sum(per_task.values()) / len(per_task)
    return {"n_tasks": len(TASKS), "n_attempts": len(TASKS) * n_attempts, "solve_rate": rate, "pass_at_k": rate,
            "valid_outputs": 0.9, "pixel_score": 0.3, "mean_reward": 1.5, "submit_rate": 0.9, "turns": 2.0,
            "per_task": per_task, "privileged": "none"}


def _training(kl=None):
    steps = list(range(1, 41))
    out = {"steps": steps, "seconds": 400.0, "reward": [1.0 + s / 40 for s in steps], "valid": [], "exact": []}
    out["teacher_kl"] = [kl - s / 1000 for s in steps] if kl else []
    for key in ("reward", "valid", "exact", "teacher_kl"):
        values = out[key]
        out[f"{key}_first"] = sum(values[:10]) / 10 if values else None
        out[f"{key}_last"] = sum(values[-10:]) / 10 if values else None
    return out


def synthetic_results():
    """Student 0.25 everywhere; GRPO + OPD 0.5 (both seeds); GRPO only 0.25 / 0.5 (seeds 0 / 1, pooled 0.375);
    checkpoints at step 20 halfway; teachers 0.75 (plain) and 1.0 (privileged)."""
    heldout = {"student": _eval(0.25), "teacher": _eval(0.75), "teacher-privileged": _eval(1.0),
               "grpo-opd-s0": _eval(0.5), "grpo-opd-s1": _eval(0.5), "grpo-only-s0": _eval(0.25),
               "grpo-only-s1": _eval(0.5), "grpo-opd-s0-step20": _eval(0.375), "grpo-opd-s1-step20": _eval(0.375),
               "grpo-only-s0-step20": _eval(0.25), "grpo-only-s1-step20": _eval(0.5)}
    heldout["teacher-privileged"]["privileged"] = "program"
    runs = {f"{arm}-s{seed}": {"arm": arm, "seed": seed, "steps": 40, "final": f"{arm}-s{seed}",
                               "checkpoints": {"20": f"{arm}-s{seed}-step20"}}
            for seed in (0, 1) for arm in ("grpo-opd", "grpo-only")}
    return {
        "seed": 0, "machine": "16 CPU cores (x), 1 GPU (NVIDIA H100 80GB HBM3)", "device": "NVIDIA H100 80GB HBM3",
        "cpus": 16, "date": "2026-12-01", "heldout_dataset": "synthetic:n=40,seed=1,difficulty=tiny",
        "validation_dataset": "synthetic:n=16,seed=4,difficulty=tiny", "n_predictions": 4, "temperature": 1.0,
        "reward_mode": "barc", "stage_seconds": {"model": 15.0, "student": 185.0, "grpo-opd-s0": 410.0},
        "total_seconds": 610.0, "loads": [1.0, 2.0], "load_mean": 1.5, "load_max": 2.0,
        "heldout": heldout,
        "training": {"grpo-opd-s0": _training(0.05), "grpo-opd-s1": _training(0.06), "grpo-only-s0": _training(),
                     "grpo-only-s1": _training()},
        "runs": runs,
        "teachers": {"teacher": {"eval": "teacher", "privileged": "none", "teacher_kl": 0.02,
                                 "teacher_kl_source": "2-step probe at learning rate 0"},
                     "teacher-privileged": {"eval": "teacher-privileged", "privileged": "program",
                                            "teacher_kl": 0.4, "teacher_kl_source": "2-step probe at learning rate 0"}},
        "opd_teacher": "teacher",
        "heldout_check": {"overlap": {"sft-student": [], "rl": []}},
    }


def test_summary_has_the_issue_keys_as_fractions_and_paired_cis():
    s = summary(synthetic_results())
    assert set(REQUIRED_KEYS) <= set(s)
    assert (s["heldout_tasks"], s["attempts_per_task"], s["seeds"], s["steps"]) == (40, 4, [0, 1], 40)
    assert (s["student_pass1"], s["grpo_opd_pass1"], s["grpo_only_pass1"], s["teacher_pass1"]) == (0.25, 0.5, 0.375,
                                                                                                   0.75)
    assert s["grpo_opd_minus_student_ci95"] == [0.25, 0.25]  # a constant shift over tasks: the interval is the shift
    # GRPO only gains 0 and 0.25 over the student (seeds 0, 1), the same on every task: over tasks alone the interval
    # is the point 0.125; over seeds, the run means 0 and 0.25 have variance 0.03125, so the seed part is 0.03125 / 2
    # on 1 df: 0.125 +- t(1) * 0.125 (a percentile bootstrap over the two seeds could not leave [0, 0.25])
    seeds_only = [0.125 - T1 * 0.125, 0.125 + T1 * 0.125]
    assert s["grpo_opd_minus_grpo_only_ci95"] == pytest.approx(seeds_only)
    assert s["intervals"]["grpo_opd_minus_grpo_only"]["task_only_ci"] == [0.125, 0.125]
    assert s["intervals"]["grpo_opd_minus_grpo_only"]["df"] == pytest.approx(1.0)
    assert s["grpo_opd_minus_student"] == 0.25 and s["grpo_only_minus_student_ci95"] == pytest.approx(seeds_only)
    assert s["device"] == "NVIDIA H100 80GB HBM3" and s["date"] == "2026-12-01"
    assert s["per_seed_pass1"] == {"grpo-opd": {"0": 0.5, "1": 0.5}, "grpo-only": {"0": 0.25, "1": 0.5}}
    teachers = s["teachers"]
    assert teachers["teacher"]["ratio_to_student"] == 3.0 and teachers["teacher-privileged"]["pass1"] == 1.0
    assert teachers["teacher-privileged"]["privileged"] == "program" and teachers["teacher"]["teacher_kl"] == 0.02
    assert s["checks"] == {"opd_teacher_ge_2x_student": True, "grpo_opd_gain_ge_5_points": True,
                           "grpo_opd_minus_student_ci_excludes_zero": True,
                           "grpo_opd_minus_grpo_only_ci_excludes_zero": False,  # [-1.46, +1.71] above
                           "heldout_ge_256_tasks_x_4_attempts": False, "seeds_ge_2": True,
                           "heldout_never_trained_on": True}


def test_curves_start_at_the_student_and_pool_seeds_per_step():
    s = summary(synthetic_results())
    opd = s["curves"]["grpo-opd"]
    assert [(p["step"], p["pass1"], p["n_seeds"]) for p in opd] == [(0, 0.25, 1), (20, 0.375, 2), (40, 0.5, 2)]
    assert opd[1]["ci95"] == [0.375, 0.375]
    only = s["curves"]["grpo-only"]
    assert [(p["step"], p["pass1"]) for p in only] == [(0, 0.25), (20, 0.375), (40, 0.375)]


def test_a_noisy_difference_gets_an_interval_around_its_mean():
    results = synthetic_results()
    for seed in (0, 1):  # the OPD arm solves the first 10 tasks fully, the rest like the student
        results["heldout"][f"grpo-opd-s{seed}"] = _eval(0.25, **{t: 1.0 for t in TASKS[:10]})
    s = summary(results)
    # by hand: both seeds gain 0.75 on 10 tasks and 0 on 30 (no seed part); the per-task gains' mean is 0.1875 and
    # their variance (10 * 0.5625^2 + 30 * 0.1875^2) / 39, so the interval is 0.1875 +- t(39) * sqrt(that / 40)
    half = t_quantile(0.975, 39) * ((10 * 0.5625 ** 2 + 30 * 0.1875 ** 2) / 39 / 40) ** 0.5
    assert s["grpo_opd_minus_student"] == pytest.approx(0.1875)
    assert s["grpo_opd_minus_student_ci95"] == pytest.approx([0.1875 - half, 0.1875 + half])


def test_missing_arms_and_teachers_give_none():
    results = synthetic_results()
    for name in [n for n in results["heldout"] if n.startswith("grpo-only")]:
        del results["heldout"][name]
    s = summary(results)
    assert s["grpo_only_pass1"] is None and s["grpo_opd_minus_grpo_only_ci95"] is None
    assert s["checks"]["grpo_opd_minus_grpo_only_ci_excludes_zero"] is None
    assert s["grpo_opd_pass1"] == 0.5


def test_arms_on_other_tasks_are_refused():
    from arc_experiments.learning.bootstrap import TaskMismatchError

    results = synthetic_results()
    results["heldout"]["grpo-opd-s1"]["per_task"].pop(TASKS[3])
    with pytest.raises(TaskMismatchError, match=TASKS[3]):
        summary(results)


def test_write_summary_and_ci_block(tmp_path):
    path = tmp_path / "docs" / "gpu_learning_summary.json"
    s = write_summary(synthetic_results(), path)
    written = json.loads(path.read_text())
    assert written == json.loads(json.dumps(s)) and set(REQUIRED_KEYS) <= set(written)
    assert written["grpo_opd_minus_student_ci95"] == [0.25, 0.25]
    block = ci_block(s)
    assert "| GRPO + OPD - student | +25.0 | [+25.0, +25.0] | [+25.0, +25.0] | 2 |" in block
    assert "| GRPO + OPD - GRPO only | +12.5 | [-146.3, +171.3] | [+12.5, +12.5] | 2 / 2 |" in block
    assert "| after GRPO + OPD (seeds: 0: 50.0%, 1: 50.0%) | 50.0% | [50.0%, 50.0%] |" in block
    assert "| after GRPO only (seeds: 0: 25.0%, 1: 50.0%) | 37.5% |" in block
    assert "| teacher-privileged | privileged (program) | 100.0% [100.0%, 100.0%] | 4.00 | 0.400 (2-step probe" in block
    assert "Not met: grpo_opd_minus_grpo_only_ci_excludes_zero, heldout_ge_256_tasks_x_4_attempts" in block
    assert "Checks" not in ci_block(s, with_checks=False)


def test_merge_joins_machines_and_notes_conflicts():
    full = synthetic_results()
    a = {**full, "heldout": {k: v for k, v in full["heldout"].items() if "-s1" not in k},
         "stage_seconds": {"model": 15.0, "student": 185.0, "grpo-opd-s0": 410.0}}
    b = {**full, "device": "NVIDIA H200", "date": "2026-12-02",
         "heldout": {k: v for k, v in full["heldout"].items() if "-s1" in k or k == "student"},
         "stage_seconds": {"model": 14.0, "student": 190.0, "grpo-opd-s1": 405.0}, "loads": [3.0]}
    # every part lists every run of the profile; a's has not evaluated seed 1's (as demo_learning writes it)
    a["runs"] = {name: ({**run, "final": None, "checkpoints": {}} if "-s1" in name else run)
                 for name, run in full["runs"].items()}
    b["heldout"]["student"] = _eval(0.5)  # the student rebuilt for b's runs, evaluated again: both count
    b["heldout"]["grpo-opd-s0"] = _eval(0.0)  # a second copy of another evaluation: the first part's is kept
    merged = merge_results([a, b])
    assert set(merged["heldout"]) == set(full["heldout"]) | {"student@2"}
    assert merged["heldout"]["student"]["per_task"] == full["heldout"]["student"]["per_task"]
    assert merged["heldout"]["student@2"]["per_task"] == _eval(0.5)["per_task"]
    assert merged["student_evals"] == ["student", "student@2"]
    assert merged["heldout"]["grpo-opd-s0"] == full["heldout"]["grpo-opd-s0"]
    assert merged["merge_notes"] == [
        "heldout student: rebuilt on another machine (student@2); the student is the per-task mean of its evaluations",
        "heldout grpo-opd-s0: two different evaluations; the first part's is kept"]
    assert merged["runs"] == {name: {**run, "student": "student@2" if "-s1" in name else "student"}
                              for name, run in full["runs"].items()}  # seed 1's evaluations come from b, its student
    pooled = summary(merged)
    assert pooled["per_seed_pass1"]["grpo-only"] == {"0": 0.25, "1": 0.5}
    assert pooled["student_pass1"] == pytest.approx((0.25 + 0.5) / 2) and pooled["student_evals"] == ["student",
                                                                                                      "student@2"]
    assert pooled["grpo_opd_minus_student"] == pytest.approx(pooled["grpo_opd_pass1"] - 0.375)
    # step 0 pools the two student builds (0.25 and 0.5 everywhere): a seed part of 0.03125 / 2 on 1 df
    assert pooled["curves"]["grpo-opd"][0] == {"step": 0, "pass1": pytest.approx(0.375), "ci95": pytest.approx(
        [0.375 - T1 * 0.125, 0.375 + T1 * 0.125]), "n_seeds": 2}
    assert merged["stage_seconds"] == {"model": 15.0, "student": 185.0, "grpo-opd-s0": 410.0, "grpo-opd-s1": 405.0}
    assert merged["repeated_stages"] == ["model", "student"] and merged["total_seconds"] == 15 + 185 + 410 + 14 + 190 + 405
    assert merged["devices"] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"] and merged["date"] == "2026-12-02"
    assert merged["load_max"] == 3.0
    assert summary(merged)["device"] == "NVIDIA H100 80GB HBM3 + NVIDIA H200"
    # an RL machine listed first: its OPD-run estimate of teacher_kl gives way to the shared machine's probe, and the
    # held-out check it did not run comes from the part that did
    rl_part = {**b, "heldout_check": None, "teachers": {"teacher": {**full["teachers"]["teacher"], "teacher_kl": 0.03,
                                                                    "teacher_kl_source": "step 1 of 1 GRPO + OPD run(s)"}}}
    merged = merge_results([rl_part, a])
    assert merged["teachers"]["teacher"]["teacher_kl"] == 0.02 and merged["heldout_check"] == full["heldout_check"]


def test_demo_report_writes_summary_docs_block_and_plots(tmp_path, monkeypatch):
    from arc_experiments.learning import docs_block, runner  # noqa: F401
    from arc_experiments.learning import profile as profile_mod  # noqa: F401
    from arc_experiments.learning import results as results_mod  # noqa: F401
    from arc_experiments.learning import plan as plan_mod  # noqa: F401
    monkeypatch.setattr(docs_block, "DOCS", tmp_path / "learning.md")
    monkeypatch.setattr(docs_block, "IMAGES", tmp_path / "img")
    profile = {**profile_mod.DEFAULT_PROFILE, "docs_section": "gpu", "image_prefix": "learning_gpu",
               "summary_file": str(tmp_path / "gpu_learning_summary.json")}
    results_path = tmp_path / "results.json"
    results_path.write_text(json.dumps(synthetic_results()))
    summary_out = docs_block.write_report(json.loads(results_path.read_text()), profile)
    assert json.loads((tmp_path / "gpu_learning_summary.json").read_text())["grpo_opd_pass1"] == 0.5
    assert summary_out["student_pass1"] == 0.25
    text = (tmp_path / "learning.md").read_text()
    block = text.split("<!-- gpu-results:begin -->")[1].split("<!-- gpu-results:end -->")[0]
    assert "| held-out metric | student (SFT warm start, before RL) | after GRPO + OPD, seed 0 | after GRPO + OPD, " \
           "seed 1 | after GRPO only (ablation), seed 0 | after GRPO only (ablation), seed 1 | teacher (longer SFT) | " \
           "teacher-privileged (privileged prompt: program) |" in block
    assert "| GRPO + OPD - GRPO only | +12.5 | [-146.3, +171.3] | [+12.5, +12.5] | 2 / 2 |" in block
    assert "teacher_kl at the first / last step: grpo-opd-s0 0.049 / 0.010, grpo-opd-s1 0.059 / 0.020." in block
    for name in ("heldout_pass1", "reward", "teacher_kl"):
        assert (tmp_path / "img" / f"learning_gpu_{name}.png").stat().st_size > 1000
        assert f"img/learning_gpu_{name}.png" in block


def test_runs_are_compared_with_the_student_they_started_from_when_the_machines_ran_different_arms():
    """Machine a: student 0.25, GRPO + OPD seed 0 0.5; machine b: its rebuilt student 0.75, GRPO + OPD seed 1 1.0 and
    GRPO only seed 1 0.75. Every OPD run gained 0.25 and GRPO only 0. Pooling the students (0.5) against the arms would
    credit GRPO only with +0.25 and put the arms level (the figures before this test)."""
    full = synthetic_results()
    a = {**full, "heldout": {"student": _eval(0.25), "grpo-opd-s0": _eval(0.5)}}
    b = {**full, "heldout": {"student": _eval(0.75), "grpo-opd-s1": _eval(1.0), "grpo-only-s1": _eval(0.75)}}
    a["runs"] = {n: {**r, "final": n if n == "grpo-opd-s0" else None, "checkpoints": {}} for n, r in full["runs"].items()}
    b["runs"] = {n: {**r, "final": n if n in ("grpo-opd-s1", "grpo-only-s1") else None, "checkpoints": {}}
                 for n, r in full["runs"].items()}
    merged = merge_results([a, b])
    assert {n: r.get("student") for n, r in merged["runs"].items() if r["final"]} == {
        "grpo-opd-s0": "student", "grpo-opd-s1": "student@2", "grpo-only-s1": "student@2"}
    s = summary(merged)
    assert s["grpo_opd_minus_student"] == pytest.approx(0.25) and s["grpo_opd_minus_student_ci95"] == [0.25, 0.25]
    assert s["grpo_only_minus_student"] == pytest.approx(0.0)
    assert s["grpo_opd_minus_grpo_only"] == pytest.approx(0.25)
    assert s["grpo_opd_minus_grpo_only_ci95"] == pytest.approx([0.25, 0.25])
    assert s["checks"]["seeds_ge_2"] is False  # GRPO only has one evaluated seed (before: True, two seeds ran)
    # its seed part is borrowed from GRPO + OPD's two runs: the interval is no claim about GRPO alone's seeds
    assert s["intervals"]["grpo_opd_minus_grpo_only"]["seed_part"] == {"grpo-opd": "pooled (1 df)",
                                                                       "grpo-only": "pooled (1 df)"}
    assert s["checks"]["grpo_opd_minus_grpo_only_ci_excludes_zero"] is None
    assert s["checks"]["grpo_opd_minus_student_ci_excludes_zero"] is True


def test_compare_arms_pools_a_control_over_experiments_each_run_against_its_student(tmp_path, capsys):
    """python -m arc_experiments.learning.compare_arms: OPD from one file (gains 0.25), GRPO only from two (gains 0 and 0.5, mean 0.25).
    By hand: GRPO only's run gains vary (variance 0.125 on 1 df), the same on every task (no task part); GRPO + OPD
    has one run and borrows it: arm - student is 0.25 +- t(1) * sqrt(0.125)."""
    from arc_experiments.learning import compare_arms
    full = synthetic_results()
    paths = []
    for i, (student, only) in enumerate(((0.25, 0.25), (0.0, 0.5))):
        part = {**full, "heldout": {"student": _eval(student), "grpo-opd-s0": _eval(student + 0.25),
                                    "grpo-only-s0": _eval(only)}}
        part["runs"] = {n: {**r, "final": n if n.endswith("-s0") else None} for n, r in full["runs"].items()}
        paths.append(tmp_path / f"results-{i}.json")
        paths[-1].write_text(json.dumps(part))
    assert compare_arms.main(["--arm", "grpo-opd", str(paths[0]), "--control", "grpo-only", *map(str, paths)]) == 0
    out = capsys.readouterr().out
    assert "grpo-only-s0 of " + str(paths[1]) + ": gain over its student +50.00 points" in out
    half = 100 * T1 * 0.125 ** 0.5
    assert (f"arm - student: +25.00 points, 95% CI [{25 - half:+.2f}, {25 + half:+.2f}] (tasks alone [+25.00, "
            "+25.00]; 40 tasks; seed part: arm pooled (1 df))") in out
    assert "control - student: +25.00 points" in out and "arm - control: +0.00 points" in out


def test_compare_arms_counts_a_run_once_across_overlapping_files_and_a_merged_file(tmp_path, capsys):
    """The same machine files given twice (overlapping globs) and a merged file beside them: each run counts once,
    so the control's mean gain is that of its two runs (0 and +50 points), not weighted by how often it was listed."""
    from arc_experiments.learning import compare_arms
    from arc_experiments.learning.merge import merge_results

    full = synthetic_results()
    parts, paths = [], []
    for i, (student, only) in enumerate(((0.25, 0.25), (0.0, 0.5))):
        part = {**full, "heldout": {"student": _eval(student), f"grpo-opd-s{i}": _eval(student + 0.25),
                                    f"grpo-only-s{i}": _eval(only)}}
        part["runs"] = {n: {**r, "final": n if n.endswith(f"-s{i}") else None} for n, r in full["runs"].items()}
        parts.append(part)
        paths.append(tmp_path / f"results-machine{i}.json")
        paths[-1].write_text(json.dumps(part))
    merged = tmp_path / "results.json"
    merged.write_text(json.dumps(merge_results(parts)))
    listed = [str(paths[0]), str(paths[1]), str(paths[0]), str(merged)]
    assert compare_arms.main(["--arm", "grpo-opd", *listed, "--control", "grpo-only", *listed]) == 0
    out = capsys.readouterr().out
    assert out.count("gain over its student") == 4 and "counted once" in out  # 2 runs per arm
    assert "control - student: +25.00 points" in out and "arm - student: +25.00 points" in out


def test_a_run_is_paired_with_the_student_build_it_recorded_not_its_evaluating_machines():
    """Machine A trained grpo-opd-s0 from its student (build "fpA"); machine B evaluated that run and had rebuilt a
    student of its own ("fpB", other numbers). The run's gain is over A's student, which merge_results used to miss
    (it gave the run the student of the machine that evaluated it)."""
    from arc_experiments.learning.merge import merge_results
    from arc_experiments.learning.report import start_of

    full = synthetic_results()
    a = {**full, "heldout": {"student": {**_eval(0.25), "model": "fpA"}}}
    a["runs"] = {"grpo-opd-s0": {"arm": "grpo-opd", "seed": 0, "steps": 40, "checkpoints": {}, "final": None,
                                 "student_model": "fpA"}}
    b = {**full, "heldout": {"student": {**_eval(0.0), "model": "fpB"}, "grpo-opd-s0": _eval(0.5)}}
    b["runs"] = {"grpo-opd-s0": {"arm": "grpo-opd", "seed": 0, "steps": 40, "checkpoints": {},
                                 "final": "grpo-opd-s0", "student_model": "fpA"}}
    for merged in (merge_results([a, b]), merge_results([b, a])):
        start = start_of(merged, "grpo-opd-s0")
        assert merged["heldout"][start]["model"] == "fpA" and merged["heldout"][start]["per_task"] == _eval(0.25)[
            "per_task"]
    only_b = merge_results([b])
    with pytest.raises(ValueError, match="grpo-opd-s0: the student build it started from \\(fpA\\) has no held-out"):
        start_of(only_b, "grpo-opd-s0")


def test_model_fingerprint_tells_builds_apart(tmp_path):
    import os

    from arc_trl.models.model_identity import model_fingerprint

    assert model_fingerprint(tmp_path) is None and model_fingerprint("Qwen/Qwen3-0.6B") is None
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    first = model_fingerprint(tmp_path)
    assert first == model_fingerprint(tmp_path) and len(first) == 16
    os.utime(tmp_path / "model.safetensors", ns=(1, 2))  # the same path rebuilt: another build
    assert model_fingerprint(tmp_path) != first
