"""Issue 41's RL-trained teacher: a GRPO run's output_dir (full fine-tuning, as configs/gpu/smollm2) is the
`teacher_model` of a later OPD run, with the weights that run trained (not its start)."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from arc_trl.opd import LocalTeacher
from arc_trl.train_entry import main
from test_trainer import CONFIG


def _argv(model_dir, out, *extra):
    return [
        "--config", CONFIG, "--model_name_or_path", str(model_dir), "--output_dir", str(out), "--use_vllm", "false",
        "--max_tasks", "4", "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_tokens_per_turn",
        "24", "--max_completion_length", "48", "--report_to", "none", "--save_strategy", "no", "--max_steps", "1",
        *extra,
    ]


def test_a_grpo_runs_output_dir_teaches_a_later_run_with_its_trained_weights(tiny_model_dir, tmp_path):
    teacher_dir = tmp_path / "grpo-long"
    # the random-init model's episodes all score alike (no advantage): AdamW's decoupled weight decay still moves
    # every weight, so the saved model differs from the start wherever the teacher could be read from the wrong one
    main(_argv(tiny_model_dir, teacher_dir, "--teacher_backend", "none", "--teacher_tau", "0", "--learning_rate",
               "1e-2", "--weight_decay", "0.5"))
    trained, start = load_file(teacher_dir / "model.safetensors"), load_file(tiny_model_dir / "model.safetensors")
    assert any(not torch.equal(trained[k], start[k]) for k in trained)  # the run moved the weights
    state = LocalTeacher.from_pretrained(str(teacher_dir), pad_token_id=0).model.state_dict()
    assert all(torch.equal(state[k], trained[k]) for k in trained)  # the teacher is the trained model

    student = tmp_path / "opd"  # pure distillation (adv_tau 0) from the start model towards that run
    main(_argv(tiny_model_dir, student, "--teacher_backend", "local", "--teacher_model", str(teacher_dir),
               "--teacher_tau", "1.0", "--adv_tau", "0.0"))
    logs = json.loads((student / "trainer_state.json").read_text())["log_history"]
    kl = [h["teacher_kl"] for h in logs if "teacher_kl" in h]
    missing = [h["teacher_missing_frac"] for h in logs if "teacher_missing_frac" in h]
    # every model token scored by the loaded teacher, which is not the student: a finite, non-zero k1 estimate (its
    # sign is not fixed on one step's few tokens: a sample mean of log s - log T)
    assert len(kl) == 1 and kl[0] != 0 and torch.isfinite(torch.tensor(kl[0])) and missing == [0.0]
