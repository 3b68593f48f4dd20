"""The learning demo's bookkeeping (scripts/demo_learning.py): stage plan, training windows and the docs block."""

from __future__ import annotations

import json

from model_helpers import load_script

demo = load_script("demo_learning")


def test_heldout_tasks_use_the_rl_families_with_their_own_seed():
    assert demo.heldout_spec(96) == "synthetic:n=96,seed=1,difficulty=tiny,families=rotate+flip+transpose+mirror_concat"


def test_plan_runs_the_ablation_only_when_asked(tmp_path):
    names = [s.name for s in demo.plan(tmp_path, seed=0, n_heldout=8, n_predictions=2, ablation=False)]
    assert names == ["model", "student", "teacher", "eval-student", "eval-teacher", "grpo-opd", "eval-grpo-opd"]
    stages = demo.plan(tmp_path, seed=3, n_heldout=8, n_predictions=2, ablation=True)
    # shared stages first, then each RL run followed by its evaluation (stages run one at a time)
    assert [s.name for s in stages] == ["model", "student", "teacher", "eval-student", "eval-teacher",
                                        "grpo-opd", "eval-grpo-opd", "grpo-only", "eval-grpo-only"]
    ablation = stages[7]
    assert ablation.needs == ("student",)
    assert {s.name: s for s in stages}["grpo-opd"].needs == ("student", "teacher")
    assert ablation.name == "grpo-only" and ablation.command[-4:] == ["--teacher_backend", "none", "--teacher_tau", "0"]
    assert ablation.done_file == tmp_path / "grpo-only" / "run_summary.json"
    assert all("--seed" in s.command and s.command[s.command.index("--seed") + 1] == "3" for s in stages)


def test_training_metrics_average_the_first_and_last_window(tmp_path):
    history = [{"step": i + 1, "reward": float(i), "teacher_kl": 1.0 / (i + 1)} for i in range(25)]
    history.append({"train_runtime": 1.0})  # the final summary entry carries no reward
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (tmp_path / "run_summary.json").write_text(json.dumps({"seconds": 12.5}))
    metrics = demo.training_metrics(tmp_path)
    assert metrics["steps"] == list(range(1, 26)) and metrics["seconds"] == 12.5
    assert metrics["reward_first"] == sum(range(10)) / 10 and metrics["reward_last"] == sum(range(15, 25)) / 10
    assert metrics["valid"] == [] and metrics["valid_first"] is None


def test_write_docs_replaces_only_the_results_block(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "DOCS", tmp_path / "learning.md")
    demo.DOCS.write_text(f"# Head\nprose\n{demo.BEGIN}\nold numbers\n{demo.END}\n## Tail\nmore prose\n")
    demo.write_docs("new numbers")
    assert demo.DOCS.read_text() == f"# Head\nprose\n{demo.BEGIN}\nnew numbers\n{demo.END}\n## Tail\nmore prose\n"


def test_gpu_profile_reaches_the_stage_commands(tmp_path):
    from pathlib import Path

    configs = Path("configs/gpu/learning")
    profile = demo.load_profile(configs)
    stages = {s.name: s for s in demo.plan(tmp_path, 0, profile["heldout_tasks"], profile["n_predictions"], True,
                                           configs, profile)}
    assert stages["model"].command[-4:] == ["--shape", "qwen3-0.6b", "--device", "cuda"]
    assert stages["student"].command[3] == "configs/gpu/learning/sft-student.yaml"
    eval_cmd = stages["eval-student"].command
    assert eval_cmd[eval_cmd.index("--backend") + 1] == "vllm"
    assert eval_cmd[eval_cmd.index("--train-config") + 1] == "configs/gpu/learning/grpo-opd.yaml"
    assert "families=rotate+flip+transpose+mirror_concat+upscale+color_swap" in eval_cmd[eval_cmd.index("--dataset") + 1]


def test_unknown_profile_key_is_named(tmp_path):
    import pytest

    (tmp_path / "profile.yaml").write_text("heldout_task: 3\n")
    with pytest.raises(SystemExit, match="heldout_task"):
        demo.load_profile(tmp_path)


def _sleeper(tmp_path, name, seconds, fail=False):
    """A stage that records its start and end times, then writes its done file (or fails)."""
    import sys

    done = tmp_path / f"{name}.done"
    code = (f"import time, pathlib; p = pathlib.Path({str(tmp_path)!r}); (p / '{name}.start').write_text(repr(time.time()));"
            f" time.sleep({seconds}); (p / '{name}.end').write_text(repr(time.time()))")
    code += "; raise SystemExit(4)" if fail else f"; pathlib.Path({str(done)!r}).write_text('ok')"
    return demo.Stage(name, [sys.executable, "-c", code], done)


def _span(tmp_path, name):
    return float((tmp_path / f"{name}.start").read_text()), float((tmp_path / f"{name}.end").read_text())


def test_stages_run_in_list_order_and_done_ones_are_skipped(tmp_path):
    stages = [_sleeper(tmp_path, "a", 0.05), _sleeper(tmp_path, "b", 0.05), _sleeper(tmp_path, "c", 0.05)]
    stages[1].done_file.write_text("from an earlier run")
    seconds = demo.run_stages(stages, tmp_path / "logs")
    assert list(seconds) == ["a", "c"] and not (tmp_path / "b.start").exists()
    assert _span(tmp_path, "a")[1] <= _span(tmp_path, "c")[0]
    assert (tmp_path / "logs" / "a.log").exists() and not (tmp_path / "logs" / "b.log").exists()


def test_a_failed_stage_stops_the_run_and_names_its_log(tmp_path):
    import pytest

    stages = [_sleeper(tmp_path, "ok", 0.05), _sleeper(tmp_path, "bad", 0.05, fail=True), _sleeper(tmp_path, "next", 0.05)]
    with pytest.raises(SystemExit, match=r"stage bad failed \(exit code 4\).*bad.log"):
        demo.run_stages(stages, tmp_path / "logs")
    assert (tmp_path / "ok.done").exists() and not (tmp_path / "next.start").exists()


def test_a_stage_without_its_done_file_fails(tmp_path):
    import sys

    import pytest

    stage = demo.Stage("quiet", [sys.executable, "-c", "print('wrote nothing')"], tmp_path / "model.safetensors")
    with pytest.raises(SystemExit, match=r"stage quiet failed \(exit code 0\)[\s\S]*wrote nothing"):
        demo.run_stages([stage], tmp_path / "logs")


def test_only_runs_the_named_stages_and_names_what_they_lack(tmp_path):
    import pytest

    argv = ["--configs", "configs/gpu/learning", "--out", str(tmp_path / "run"), "--ablation", "--no-docs"]
    with pytest.raises(SystemExit, match="grpo-only needs student, which is neither done nor selected"):
        demo.main([*argv, "--only", "grpo-only,eval-grpo-only"])
    with pytest.raises(SystemExit, match=r"no stage \['bogus'\]"):
        demo.main([*argv, "--resume", "--only", "model,bogus"])
