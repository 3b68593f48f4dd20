"""The 8B layout configs: the one-GPU recipe's workload everywhere (the layout table compares like with like), each
laid out on the GPUs its header says, and each plan buildable offline with local model paths."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from arc_trl.launch.launch_config import gpu_split
from arc_trl.launch.server_plan import build_plan

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
RECIPE = "qwen3-8b-1gpu-colocate.yaml"
LAYOUTS = {  # config -> (student vLLM GPUs, trainer GPUs, teacher GPUs)
    RECIPE: (0, 1, 0),
    "qwen3-8b-2gpu-colocate.yaml": (0, 2, 0),
    "qwen3-8b-4gpu-colocate.yaml": (0, 4, 0),
    "qwen3-8b-2gpu-server.yaml": (1, 1, 0),
    "qwen3-8b-3gpu-server.yaml": (1, 2, 0),
    "qwen3-8b-4gpu-server.yaml": (2, 2, 0),
    "qwen3-8b-4gpu.yaml": (2, 1, 1),
}
WORKLOAD = ("model_name_or_path", "use_peft", "lora_r", "lora_alpha", "lora_target_modules", "gradient_checkpointing",
            "dataset", "max_prompt_tokens", "agent_mode", "reward_mode", "max_turns", "max_tokens_per_turn",
            "max_completion_length", "learning_rate", "num_generations", "per_device_train_batch_size", "beta",
            "defer_old_logps", "teacher_tau", "adv_tau")


def load(name: str) -> dict:
    return yaml.safe_load((CONFIGS / name).read_text())


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layouts_share_the_recipe_workload_and_its_32_episodes(name):
    config, recipe = load(name), load(RECIPE)
    assert {k: config.get(k) for k in WORKLOAD} == {k: recipe.get(k) for k in WORKLOAD}
    split = gpu_split(config)
    assert (split.vllm, split.trainer, split.teacher) == LAYOUTS[name]
    episodes = config["per_device_train_batch_size"] * config["gradient_accumulation_steps"] * split.trainer
    assert episodes == 32


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layouts_plan_offline_with_local_models(name, tmp_path):
    config = load(name)
    assert config.get("report_to") in ("none", ["none"], None)  # nothing reports to a service by default
    split = gpu_split(config)
    plan = build_plan(config, CONFIGS / name, [str(i) for i in range(split.total)],
                      train_args=["--model_name_or_path", "/m/student", "--teacher_model", "/m/teacher"])
    for server in plan.servers:
        assert "Qwen/" not in " ".join(server.command)  # no hub id reaches a server
