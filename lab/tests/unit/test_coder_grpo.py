"""The GRPO / OPD stages of issue 60 (arc_experiments/coder/grpo.py): what each arm trains on and with which teacher,
their order in the queue, and when they are ready. A CPU run of one stage is in lab/tests/integration."""

from __future__ import annotations

import pytest

from arc_experiments.coder import grpo
from arc_experiments.coder import run as queue
from arc_experiments.coder.plan import ARMS as HARNESSES
from arc_experiments.coder.plan import GEN_KV_GIB, validation_ids
from arc_trl.tasks import load_tasks


@pytest.fixture
def work(tmp_path):
    return queue.Work(tmp_path / "work", tmp_path / "wheels")


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_training_tasks_are_the_training_split_without_its_validation_tasks():
    train = [t.id for t in load_tasks("arc-agi-1/train")]
    ids = grpo.training_ids(train)
    evaluation = {t.id for t in load_tasks("arc-agi-1/eval")}
    assert len(ids) == 300 and not set(ids) & set(validation_ids(train)) and not set(ids) & evaluation


@pytest.mark.parametrize(("arm", "adv_tau"), [("grpo", None), ("grpo-opd", "1.0"), ("opd", "0.0")])
def test_each_arm_is_its_teacher_and_weights(tmp_path, arm, adv_tau):
    argv = grpo.train_argv(tmp_path / "s", tmp_path / "t", arm, 2, tmp_path / "out", ["a", "b"],
                           HARNESSES["coder-digits"])
    assert flag(argv, "--seed") == "2" and flag(argv, "--model_name_or_path") == str(tmp_path / "s")
    assert argv[argv.index("--task_ids") + 1:argv.index("--task_ids") + 3] == ["a", "b"]
    assert flag(argv, "--adv_tau") == adv_tau
    if arm == "grpo":  # GRPO alone: no teacher, whatever is passed
        assert "--teacher_model" not in argv and "--teacher_tau" not in argv
    else:
        assert flag(argv, "--teacher_backend") == "local" and flag(argv, "--teacher_model") == str(tmp_path / "t")
        assert float(flag(argv, "--teacher_tau")) > 0


def test_an_opd_arm_without_its_teacher_or_an_unknown_arm_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs the teacher"):
        grpo.train_argv(tmp_path, None, "opd", 0, tmp_path, [], HARNESSES["coder-digits"])
    with pytest.raises(ValueError, match="not one of"):
        grpo.train_argv(tmp_path, tmp_path, "ppo", 0, tmp_path, [], HARNESSES["coder-digits"])


@pytest.mark.parametrize("name", list(HARNESSES))
def test_the_run_plays_the_harness_its_warm_start_was_trained_in(tmp_path, name):
    harness = HARNESSES[name]
    argv = grpo.train_argv(tmp_path, tmp_path, "grpo", 0, tmp_path, [], harness)
    assert flag(argv, "--agent_mode") == harness.agent_mode
    assert flag(argv, "--check_transform") == str(harness.check_transform).lower()
    assert int(flag(argv, "--max_tokens_per_turn")) == harness.max_tokens_per_turn
    assert flag(argv, "--prompt_template") == (str(grpo.ROOT / harness.prompt_template) if harness.prompt_template
                                               else None)


def test_the_opd_arms_first_seed_runs_first_and_every_arm_has_three_seeds(work):
    names = [name for name, _, _ in queue.stages(work) if name.startswith("grpo-")]
    assert names[0] == "grpo-qwen05-grpo-opd-s0"  # its step 1 is the gap the issue measures first
    assert sorted(names) == sorted(f"grpo-qwen05-{a}-s{s}" for a in grpo.ARMS for s in grpo.SEEDS)


def test_grpo_alone_waits_for_the_student_the_opd_arms_for_the_teacher_too(work):
    """Carried-in transcripts stand for a zero-shot folder (the warm start needs only them), not for the model."""
    ready = {name: is_ready for name, is_ready, _ in queue.stages(work)}
    for model in ("qwen05", "qwen15"):
        work.path("warm", model).mkdir(parents=True)
        work.path("warm", model, "transcripts.jsonl").write_text("{}\n")
    assert not ready["grpo-qwen05-grpo-s0"]()
    work.path("models", "qwen05").mkdir(parents=True)
    work.path("models", "qwen05", "model.safetensors").write_bytes(b"")
    assert ready["grpo-qwen05-grpo-s0"]() and ready["warm-qwen05"]()
    assert not ready["grpo-qwen05-grpo-opd-s0"]() and not ready["grpo-qwen05-opd-s0"]()
    work.path("models", "qwen15").mkdir(parents=True)
    work.path("models", "qwen15", "model.safetensors").write_bytes(b"")
    assert ready["grpo-qwen05-grpo-opd-s0"]() and ready["grpo-qwen05-opd-s0"]()


def test_a_finished_run_is_not_trained_again(work, monkeypatch):
    out = work.path("grpo", "grpo-s0")
    out.mkdir(parents=True)
    (out / "run_summary.json").write_text("{}")
    monkeypatch.setattr(queue, "warm_model", lambda *a: pytest.fail("a finished run made its warm start"))
    assert grpo.grpo(work, "grpo", 0, queue) == 0


def test_the_students_transcripts_need_only_its_zero_shot_training_folder(work, monkeypatch):
    """`zero-shot-train-qwen05` generates the training split alone: what the 0.5B's warm start reads (its evaluation
    folder, 6 min of a machine, is committed already)."""
    folders = []
    monkeypatch.setattr(queue, "generate_folders", lambda w, name, model, jobs, **k: folders.extend(j[0] for j in jobs))
    work.root.mkdir(parents=True)
    work.path("choice.json").write_text('{"chosen": "coder-digits"}')
    run = {name: stage for name, _, stage in queue.stages(work)}
    run["zero-shot-train-qwen05"]()
    assert folders == [work.path("zero-shot", "qwen05", "train")]


def test_a_finished_runs_adapter_is_evaluated_on_validation_and_eval_beside_the_warm_baseline(work, monkeypatch):
    """eval-grpo-...: ready once the run saved its final adapter (a hand-made stand-in summary is not a run); two
    folders, the 100 validation tasks and the evaluation split, 8 attempts, the warm 0.5B with the run's adapter."""
    jobs = []
    monkeypatch.setattr(queue, "generate_folders", lambda w, name, model, js, **k: jobs.extend(js) or 0)
    monkeypatch.setattr(queue, "warm_model", lambda w, m: w.path("warm", m, "model"))
    work.root.mkdir(parents=True)
    work.path("choice.json").write_text('{"chosen": "coder-digits"}')
    work.path("warm", "qwen05").mkdir(parents=True)
    work.path("warm", "qwen05", "transcripts.jsonl").write_text("{}\n")
    work.path("models", "qwen05").mkdir(parents=True)
    work.path("models", "qwen05", "model.safetensors").write_bytes(b"")
    stages = {name: (is_ready, stage) for name, is_ready, stage in queue.stages(work)}
    ready, stage = stages["eval-grpo-qwen05-grpo-opd-s0"]
    out = work.path("grpo", "grpo-opd-s0")
    out.mkdir(parents=True)
    (out / "run_summary.json").write_text('{"placeholder": "skipped"}')
    (out / "adapter_config.json").write_text("{}")
    assert not ready()  # a stand-in
    (out / "run_summary.json").write_text("{}")
    assert ready() and stage() == 0
    assert [folder.name for folder, _, _ in jobs] == ["validation", "eval"] and all(n == 8 for _, _, n in jobs)
    for folder, argv, _ in jobs:
        assert flag(argv, "--adapter") == str(out) and flag(argv, "--model") == str(work.path("warm", "qwen05", "model"))
        assert float(flag(argv, "--kv-cache-memory-gib")) == GEN_KV_GIB  # a fixed cache beside the trainings
    assert flag(jobs[0][1], "--dataset") == "arc-agi-1/train" and flag(jobs[1][1], "--dataset") == "arc-agi-1/eval"
    assert len(jobs[0][1][jobs[0][1].index("--task-ids") + 1:]) == 100 and "--task-ids" not in jobs[1][1]


def test_the_arms_equal_budget_is_cut_to_what_the_deadline_leaves():
    assert grpo.time_budget(None, 0.0, 400) == (["--max_train_seconds", "400"], 400 + grpo.STARTUP_S + 600)
    now = 1000.0
    assert grpo.time_budget(now + grpo.STARTUP_S + 900, now, 400)[0] == ["--max_train_seconds", "400"]
    assert grpo.time_budget(now + grpo.STARTUP_S + 300, now, 400)[0] == ["--max_train_seconds", "300"]
