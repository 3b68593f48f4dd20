"""The trainer of the `async_rollouts` integration tests, in one process or in each of two (torchrun).

`build_trainer` builds `ArcGRPOTrainer` as `arc-trl train` builds it, with `use_vllm: true, vllm_mode: server`
against a stand-in server (tests/fake_vllm_server.py) over real HTTP; only TRL's `VLLMGeneration` is replaced, by
`FakeVLLMGeneration` (TRL's `__init__` would open an NCCL group to the server): its `sync_weights`, the weight push
TRL calls once per step on every process, calls `on_sync` instead. The caller patches
`trl.trainer.grpo_trainer.VLLMGeneration` with it first. One turn per episode, one reply (`CODE`) to every request.
Used by tests/integration/test_async_rollouts.py and tests/async_rollouts_worker.py.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

CODE = "```python\nprint(len(train_inputs))\n```"


class FakeVLLMGeneration:
    """What the trainer reads of TRL's `VLLMGeneration` in server mode; `sync_weights` calls `on_sync`."""

    def __init__(self, **kwargs) -> None:
        for key in ("model", "accelerator", "mode", "structured_outputs_regex", "server_base_url", "server_host",
                    "server_port", "server_timeout", "repetition_penalty", "temperature", "top_p", "top_k", "min_p",
                    "max_completion_length", "logprobs"):
            setattr(self, key, kwargs[key])
        self.generation_kwargs = kwargs["generation_kwargs"] or {}
        self.tensor_parallel_size = 1
        self.vllm_client = SimpleNamespace(get_server_info=lambda: {"model_config": {
            "logprobs_mode": "processed_logprobs"}})
        self.on_sync = None

    def sync_weights(self) -> None:
        self.on_sync()


def reply_ids(tokenizer) -> list[int]:
    """The stand-in server's reply: one code block, then the template's end of turn."""
    from arc_trl.chat_template import end_of_turn_id

    eos = [tokenizer.eos_token_id]
    return tokenizer(CODE, add_special_tokens=False)["input_ids"] + [end_of_turn_id(tokenizer, eos)]


def build_trainer(model_dir, out, server_url: str, tasks: tuple[str, ...], async_rollouts: int,
                  scheduling: str = "lockstep", max_steps: int = 3, **grpo):
    """The trainer (2 generations of one prompt per process and step, the tasks in the dataset's order: sorted ids,
    `shuffle_dataset: false`) and its prompts' token ids -> task id."""
    from trl import GRPOConfig, ModelConfig

    from arc_trl.chat_template import prompt_ids
    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(max_turns=1, max_tokens_per_turn=32, sandbox_workers=1, async_rollouts=async_rollouts,
                    rollout_scheduling=scheduling)
    args = GRPOConfig(**{**dict(
        output_dir=str(out), num_generations=2, per_device_train_batch_size=2, max_completion_length=64,
        use_cpu=True, bf16=False, report_to=[], seed=0, beta=0.0, learning_rate=1e-3, max_steps=max_steps,
        logging_steps=1, save_strategy="no", shuffle_dataset=False, use_vllm=True, vllm_mode="server",
        vllm_server_base_url=server_url), **grpo})
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=list(tasks)), "repl", tokenizer=tokenizer)
    trainer = ArcGRPOTrainer(str(model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer)
    task_of = {tuple(prompt_ids(tokenizer, row["prompt"], **trainer.chat_template_kwargs)): row["task_id"]
               for row in dataset}
    return trainer, task_of


def record_trained(trainer, add: Callable[..., None]) -> None:
    """Each batch the trainer scores: `add("trained", step, its rows' task ids, its episodes' policy versions)`."""
    score = trainer._generate_and_score_completions

    def recorded(inputs):
        output = score(inputs)
        add("trained", trainer.state.global_step, [row["task_id"] for row in inputs],
            [ep.policy_version for ep in trainer.rollout.last_episodes])
        return output

    trainer._generate_and_score_completions = recorded


def rollout_in_flight(trainer) -> bool:
    """Whether this process's background rollout is still playing."""
    pending = trainer.async_rollouts.pending if trainer.async_rollouts is not None else None
    return pending is not None and not pending.future.done()
