"""One GRPO + OPD stage of issue 60 played on CPU (`--smoke` sizes) with a tiny random model standing in for both warm
starts (the teacher another seed's weights, one tokenizer): configs/coder/grpo-qwen05.yaml with the stage's arguments parses, loads the 300 training tasks' prompts and
trains a step with the teacher term live, before a GPU machine is spent on it."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from arc_experiments.coder import grpo
from arc_experiments.coder import run as queue
from arc_trl.models.tiny_model import TinyModelSpec, build_tiny_model


@pytest.mark.slow
def test_the_opd_arm_trains_a_step_on_arc_training_tasks_with_the_teacher_live(tmp_path, monkeypatch):
    models = {"qwen05": build_tiny_model(tmp_path / "student"),  # one tokenizer, two different sets of weights
              "qwen15": build_tiny_model(tmp_path / "teacher", TinyModelSpec(seed=1))}
    work = queue.Work(tmp_path / "work", tmp_path / "wheels", smoke=True)
    work.root.mkdir(parents=True)
    shutil.copy(grpo.ROOT / "results" / "coder" / "choice.json", work.path("choice.json"))  # the committed harness
    for model, folder in models.items():  # trained folders: warm_model serves them as they are
        shutil.copytree(folder, work.path("warm", model, "model"))
        work.path("warm", model, "transcripts.jsonl").write_text("{}\n")

    monkeypatch.setenv("GRPO_DEADLINE", str(time.time() + grpo.STARTUP_S + 900))  # a session's end: a time budget
    assert grpo.grpo(work, "grpo-opd", 0, queue) == 0, work.log("grpo-qwen05-grpo-opd-s0").read_text()[-3000:]
    out = work.path("grpo", "grpo-opd-s0")
    logs = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert len(logs) == 1 and logs[0]["teacher_missing_frac"] == 0.0 and logs[0]["teacher_kl"] > 0.0, logs
    config = json.loads((out / "arc_trl_config.json").read_text())["arc"]
    assert config["teacher_tau"] == grpo.TEACHER_TAU and config["check_transform"] is True, config
    assert config["max_train_seconds"] >= 899  # the deadline's budget reached the trainer; one step stayed within it
    assert json.loads((out / "run_summary.json").read_text())["time_budget_stop_step"] is None
    # what is committed of it, and its figures: the gap at step 1 is the trainer's own teacher_kl of that step
    from arc_experiments.coder.runs import run_figures, slim_runs

    [committed] = slim_runs(work.root, tmp_path / "results")
    figures = run_figures(committed)
    assert figures["teacher_kl_step1"] == round(logs[0]["teacher_kl"], 6) and figures["steps"] == 1
    assert figures["step_s"]["teacher"] > 0 and figures["trained_tokens_per_s"] > 0
    # its evaluation stage on the same machine: the final adapter on the validation and evaluation tasks (smoke
    # sizes: 2 tasks, 1 attempt), generated and scored
    from arc_experiments.coder.scoring import scorers_running

    assert grpo.trained(out) and grpo.evaluate(work, "grpo-opd", 0, queue) == 0
    deadline = time.monotonic() + 300
    while scorers_running(work) and time.monotonic() < deadline:
        time.sleep(1)
    for split in ("validation", "eval"):
        metrics = json.loads((out / split / "metrics.json").read_text())
        assert metrics["n_tasks"] == 2 and metrics["n_attempts"] == 2, metrics

