"""The teacher tests' trainer: a tiny `ArcGRPOTrainer` with a fresh LoRA adapter, and a recorder of what its teacher
scores (tests/integration/test_teacher.py, tests/integration/test_peer_teacher_training.py)."""

from __future__ import annotations

from typing import Any

TASK_IDS = ["6150a2bd", "67a3c6ac"]  # two ARC-AGI-1 training tasks: rows 0 and 1 of the dataset


def lora_trainer(model_dir, out, *, grpo: dict[str, Any] | None = None, lora_dropout: float = 0.0,
                 reward_funcs=None, **arc_overrides):
    """The tiny model with a fresh LoRA adapter (r 4 on q/v), on TASK_IDS, one-turn episodes of 16 tokens, 4 rows (2
    groups of 2) per generation batch, one step, on CPU. `grpo`: more `GRPOConfig` keys; `arc_overrides`: `ArcConfig`
    keys (the teacher's)."""
    from peft import LoraConfig
    from trl import GRPOConfig, ModelConfig

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(max_turns=1, max_tokens_per_turn=16, sandbox_workers=1, **arc_overrides)
    args = GRPOConfig(output_dir=str(out), per_device_train_batch_size=4, num_generations=2, max_completion_length=16,
                      max_steps=1, use_cpu=True, bf16=False, report_to=[], beta=0.0, **(grpo or {}))
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=TASK_IDS), "repl", tokenizer=tokenizer)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM",
                      lora_dropout=lora_dropout)
    return ArcGRPOTrainer(str(model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer,
                          peft_config=lora, reward_funcs=reward_funcs)


def record_teacher_scores(trainer) -> list[tuple[list[list[int]], list[int]]]:
    """Every (sequences, prompt_lengths) the trainer's teacher scores from now on, in call order (still scored)."""
    calls = []
    score = trainer.teacher.score

    def recording_score(sequences, prompt_lengths):
        calls.append((sequences, prompt_lengths))
        return score(sequences, prompt_lengths)

    trainer.teacher.score = recording_score
    return calls
