"""In-training evaluation: held-out tasks played by the policy during training, logged with the run's metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arc_trl.eval.callback import EVAL_PREFIX, ArcEvalCallback, process_rounds, summarise

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml")
FRACTIONS = ("valid_outputs", "submit_rate", "code_found_rate", "truncated_rate")


@pytest.fixture(scope="module")
def task_folder(memorized_task, tmp_path_factory):
    from arc_trl.data import save_tasks_folder

    return save_tasks_folder([memorized_task], tmp_path_factory.mktemp("tasks"))


def test_training_logs_held_out_pass_at_k_at_start_and_every_step(memorized_model_dir, task_folder, tmp_path):
    """A 2-step run (transformers generation) with eval_every_steps=1: a baseline at step 0, then one per step."""
    from arc_trl.train_entry import main

    out = tmp_path / "run"
    summary = main([
        "--config", CONFIG, "--model_name_or_path", str(memorized_model_dir), "--output_dir", str(out),
        "--use_vllm", "false", "--dataset", str(task_folder), "--eval_dataset", str(task_folder),
        "--eval_every_steps", "1", "--eval_n_predictions", "4", "--max_steps", "2", "--save_steps", "10",
        "--num_generations", "4", "--per_device_train_batch_size", "4", "--learning_rate", "1e-6",
        "--max_turns", "3", "--max_tokens_per_turn", "400", "--max_completion_length", "1200",
        "--max_prompt_tokens", "1600", "--report_to", "none", "--dump_rollouts", "0",
    ])
    assert summary["global_step"] == 2
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    evals = [h for h in history if EVAL_PREFIX + "pass@1" in h]
    assert [h["step"] for h in evals] == [0, 1, 2]
    for h in evals:
        for k in ("1", "2", "4"):
            assert 0.0 <= h[f"{EVAL_PREFIX}pass@{k}"] <= 1.0
        assert h[f"{EVAL_PREFIX}pass@1"] <= h[f"{EVAL_PREFIX}pass@2"] <= h[f"{EVAL_PREFIX}pass@4"]
        for name in FRACTIONS:
            assert 0.0 <= h[EVAL_PREFIX + name] <= 1.0
        assert 0.0 <= h[EVAL_PREFIX + "reward"] <= 10.0  # barc ladder
        assert h[EVAL_PREFIX + "n_tasks"] == 1.0 and h[EVAL_PREFIX + "turns"] >= 1
    # the memorised model writes code and solves its task at least once in the 12 attempts
    assert max(h[EVAL_PREFIX + "code_found_rate"] for h in evals) > 0
    assert max(h[EVAL_PREFIX + "pass@4"] for h in evals) == 1.0
    # training metrics are still logged at every step, next to the evaluation
    assert [h["step"] for h in history if "reward" in h] == [1, 2]
    # the attempts of each evaluation, in the score format
    dumped = [json.loads(line) for line in (out / "eval_arc" / "step_000002.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["attempt"]) for r in dumped] == [("syn-flip-0", a) for a in range(4)]
    assert all(isinstance(r["completion"], str) and r["step"] == 2 for r in dumped)


def _python_trainer(model_dir, out, eval_dataset, **arc_keys):
    """An ArcGRPOTrainer built the way the README's Python quick start builds one (no train_entry)."""
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from arc_trl import ArcConfig, ArcGRPOTrainer, build_dataset, load_tasks, resolve_chat_template

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    resolve_chat_template(tokenizer)
    train = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd", "67a3c6ac"]), "repl", tokenizer=tokenizer)
    arc = ArcConfig(max_turns=1, max_tokens_per_turn=8, sandbox_workers=1, **arc_keys)
    args = GRPOConfig(output_dir=str(out), per_device_train_batch_size=2, num_generations=2, max_completion_length=8,
                      max_steps=2, logging_steps=1, save_strategy="no", use_cpu=True, bf16=False, report_to=[],
                      seed=0, use_vllm=False)
    return ArcGRPOTrainer(str(model_dir), args, arc, train_dataset=train, eval_dataset=eval_dataset,
                          processing_class=tokenizer)


def test_trainer_train_plays_the_held_out_tasks_when_eval_every_steps_is_set(tiny_model_dir, tmp_path):
    """From Python, `trainer.train()` evaluates as `arc-trl train` does: the trainer attaches the callback from its
    ArcConfig (eval_every_steps 1: a baseline at step 0, then after each step; eval_max_tasks 1 of the 2 given)."""
    from arc_trl import build_dataset, load_tasks

    held_out = build_dataset(load_tasks("arc-agi-1/train", ids=["68b16354", "6150a2bd"]), "repl")
    trainer = _python_trainer(tiny_model_dir, tmp_path, held_out, eval_every_steps=1, eval_n_predictions=2,
                              eval_max_tasks=1)
    try:
        assert sum(isinstance(cb, ArcEvalCallback) for cb in trainer.callback_handler.callbacks) == 1
        trainer.train()
    finally:
        trainer.close()
    history = trainer.state.log_history
    evals = [h for h in history if EVAL_PREFIX + "pass@1" in h]
    assert [h["step"] for h in evals] == [0, 1, 2]
    assert all(h[EVAL_PREFIX + "n_tasks"] == 1.0 and 0.0 <= h[EVAL_PREFIX + "pass@1"] <= h[EVAL_PREFIX + "pass@2"]
               <= 1.0 for h in evals), evals
    assert [h["step"] for h in history if "reward" in h] == [1, 2]  # training logged as usual next to them
    first = held_out[0]["task_id"]
    for step in (0, 1, 2):  # each evaluation's attempts: the first held-out task, eval_n_predictions times
        lines = (tmp_path / "eval_arc" / f"step_{step:06d}.jsonl").read_text().splitlines()
        assert [(r["task_id"], r["attempt"], r["step"]) for r in map(json.loads, lines)] == [
            (first, 0, step), (first, 1, step)]


def test_eval_every_steps_without_an_eval_dataset_fails_before_the_model_is_loaded(tiny_model_dir, tmp_path):
    from trl import GRPOConfig

    from arc_trl import ArcConfig, ArcGRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[])
    with pytest.raises(ValueError, match="eval_every_steps > 0 needs an eval_dataset"):
        ArcGRPOTrainer(str(tmp_path / "no-such-model"), args, ArcConfig(eval_every_steps=2))


def test_evaluate_samples_in_eval_mode_at_its_temperature_then_restores_both(tiny_model_dir, tmp_path):
    from trl import GRPOConfig, ModelConfig

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(max_turns=1, max_tokens_per_turn=8, sandbox_workers=1)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=8, max_steps=1, use_cpu=True, bf16=False, report_to=[], seed=0)
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(tiny_model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd", "67a3c6ac", "68b16354"]), "repl")
    trainer = ArcGRPOTrainer(str(tiny_model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer)
    try:
        seen = []
        generate = trainer._generate_single_turn

        def spy(prompts, *a, **k):
            seen.append((len(prompts), trainer.model.training, trainer.generation_config.temperature,
                         trainer.generation_kwargs["temperature"]))
            return generate(prompts, *a, **k)

        trainer._generate_single_turn = spy
        callback = ArcEvalCallback(trainer, dataset, every_steps=5, n_predictions=3, max_tasks=2, temperature=0.5,
                                   save_completions=False)
        trainer.model.train()
        metrics = callback.evaluate()
        # 2 tasks x 3 attempts in batches of the per-device generation batch (2), at temperature 0.5, in eval mode
        assert seen == [(2, False, 0.5, 0.5)] * 3
        assert trainer.model.training and trainer.generation_config.temperature == 1.0
        assert trainer.generation_kwargs["temperature"] == 1.0
        assert metrics[EVAL_PREFIX + "pass@1"] == 0.0 and metrics[EVAL_PREFIX + "truncated_rate"] == 1.0
        assert trainer.state.log_history[-1][EVAL_PREFIX + "pass@3"] == 0.0
        trainer.model.eval()
        callback.evaluate()
        assert not trainer.model.training
        with pytest.raises(ValueError, match="eval_n_predictions must be >= 1"):
            ArcEvalCallback(trainer, dataset, every_steps=1, n_predictions=0)
    finally:
        trainer.close()


@pytest.mark.parametrize("n_pairs,world,chunk", [(12, 1, 4), (7, 2, 2), (5, 4, 1), (3, 4, 8), (9, 3, 2)])
def test_every_attempt_is_played_once_in_the_same_number_of_rounds_on_every_process(n_pairs, world, chunk):
    pairs = list(range(n_pairs))
    per_rank = [process_rounds(pairs, world, rank, chunk) for rank in range(world)]
    assert len({len(rounds) for rounds in per_rank}) == 1  # collective generation: same number of calls
    played = [p for rounds in per_rank for part, dummy in rounds if not dummy for p in part]
    assert sorted(played) == pairs
    assert all(part and len(part) <= chunk for rounds in per_rank for part, _ in rounds)


def test_summary_uses_the_unbiased_pass_at_k_over_tasks_with_solutions():
    from types import SimpleNamespace

    tasks = [SimpleNamespace(id="a"), SimpleNamespace(id="b"), SimpleNamespace(id="hidden")]

    def result(task, passed, reward):
        return {"task": task, "passed": passed, "valid_outputs": passed is not None, "submitted": True,
                "code_found": True, "truncated": False, "turns": 2, "model_tokens": 10, "reward": reward}

    results = [result(0, True, 1.0), result(0, False, 0.0), result(0, False, 0.0), result(0, False, 0.0),
               result(1, False, 0.0)] + [result(1, False, 0.0)] * 3 + [result(2, None, None)] * 4
    metrics = summarise(results, tasks, 4)
    assert metrics[EVAL_PREFIX + "pass@1"] == pytest.approx((1 / 4 + 0) / 2)
    assert metrics[EVAL_PREFIX + "pass@2"] == pytest.approx((1 - 3 / 6) / 2)  # 1 - C(3,2)/C(4,2) for task a
    assert metrics[EVAL_PREFIX + "pass@4"] == pytest.approx(0.5)
    assert metrics[EVAL_PREFIX + "reward"] == pytest.approx(1 / 8)  # tasks without solutions have no reward
    assert metrics[EVAL_PREFIX + "valid_outputs"] == pytest.approx(8 / 12)
