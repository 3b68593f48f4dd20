"""A trainer whose vLLM generation is scripted, for tests of TRL's vLLM-only paths on CPU.

The real `ArcRollout` drives `trainer._generate_single_turn`, replaced by a script returning vLLM-shaped output
(token ids and per-token log-probs: the model's own, perturbed, one missing per row), with `use_vllm` switched on
after construction (as in tests/integration/test_trainer_masks.py). Used by test_defer_old_logps.py and test_micro_batches.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

SUBMIT = "```python\nSUBMIT([np.rot90(np.array(g), 2).tolist() for g in test_inputs])\n```"
WRONG = "```python\nSUBMIT([[[1]] for g in test_inputs])\n```"


class FakeTeacher:
    """Deterministic teacher log-probs for the completion tokens."""

    def score(self, sequences, prompt_lengths):
        return [[-1.0 - 0.1 * (k % 5) for k in range(len(s) - p)] for s, p in zip(sequences, prompt_lengths)]


def scripted_vllm_trainer(model_dir, out, mode: str, teacher: bool, texts=None, **grpo):
    from trl import GRPOConfig, ModelConfig

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    grpo = dict(dict(per_device_train_batch_size=4, max_steps=1), **grpo)
    teacher_args = dict(teacher_backend="server", teacher_server_url="http://unused", teacher_tau=0.7,
                        teacher_logprob_clip=0.5) if teacher else {}
    arc = ArcConfig(max_turns=1, max_tokens_per_turn=64, sandbox_workers=1, **teacher_args)
    args = GRPOConfig(
        output_dir=str(out), num_generations=2, max_completion_length=64, use_cpu=True, bf16=False, report_to=[],
        seed=0, beta=0.0, vllm_importance_sampling_mode=mode, **grpo,
    )
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd", "67a3c6ac"]), "repl", tokenizer=tokenizer)
    trainer = ArcGRPOTrainer(str(model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer,
                             teacher=FakeTeacher() if teacher else None)
    eos = tokenizer.eos_token_id
    texts = texts or [SUBMIT, WRONG, SUBMIT, WRONG]
    def scripted_single_turn(prompt_ids, images, multimodal_fields, num_generations):
        noise = torch.Generator().manual_seed(0)  # the same batch at every call
        ids = [tokenizer(texts[i % len(texts)], add_special_tokens=False)["input_ids"] + [eos] for i in range(len(prompt_ids))]
        logprobs = []
        with torch.no_grad():  # the model's own log-probs (a direct call, not TRL's counted function), perturbed
            for prompt, completion in zip(prompt_ids, ids):
                seq = torch.tensor([list(prompt) + completion])
                logits = trainer.model(seq).logits[0, len(prompt) - 1: -1].float()
                own = logits.log_softmax(-1).gather(-1, torch.tensor(completion).unsqueeze(-1)).squeeze(-1)
                row = (own + 0.05 * torch.randn(own.shape, generator=noise)).tolist()
                row[2] = None  # vLLM gave no value here
                logprobs.append(row)
        return ids, logprobs

    trainer._generate_single_turn = scripted_single_turn
    trainer.use_vllm = True  # TRL's vLLM-only paths (importance sampling correction) on the scripted output
    trainer.vllm_generation = SimpleNamespace(mode="colocate", max_completion_length=64, temperature=1.0)
    trainer._last_loaded_step = trainer.state.global_step  # nothing to sync
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer
