"""ArcGRPOTrainer on scripted episodes: budget endings are masked like truncations, missing sampler log-probs stay NaN.

Generation goes through the real `ArcRollout` -> `TrainerGenerator` -> `trainer._generate_single_turn` (replaced by
a script that returns vLLM-shaped output: token ids and per-token logprobs with None where vLLM had no value), with
`use_vllm` switched on after construction so that TRL's importance-sampling correction runs on the result.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

SUBMIT = "```python\nSUBMIT([np.rot90(np.array(g), 2).tolist() for g in test_inputs])\n```"
LOOK = "```python\nprint(train_inputs)\n```"  # its (long) output does not fit in the 64-token episode budget


@pytest.fixture(scope="module")
def scored(tiny_model_dir, tmp_path_factory):
    """One generation batch of 4 episodes: rows 0-1 submit in one turn, rows 2-3 end by the budget."""
    from trl import GRPOConfig, ModelConfig

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(max_turns=2, max_tokens_per_turn=40, sandbox_workers=1)
    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("masks")), per_device_train_batch_size=4, num_generations=2,
        max_completion_length=64, max_steps=1, use_cpu=True, bf16=False, report_to=[], seed=0, beta=0.0,
        mask_truncated_completions=True, vllm_importance_sampling_mode="token_truncate",
    )
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(tiny_model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd", "67a3c6ac"]), "repl", tokenizer=tokenizer)
    trainer = ArcGRPOTrainer(str(tiny_model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer)
    eos = tokenizer.eos_token_id
    turns = {0: SUBMIT, 1: SUBMIT, 2: LOOK, 3: LOOK}

    def scripted_single_turn(prompt_ids, images, multimodal_fields, num_generations):
        assert len(prompt_ids) == 4  # only the first turn generates: every episode ends in it
        ids = [tokenizer(turns[i], add_special_tokens=False)["input_ids"] + [eos] for i in range(4)]
        # vLLM-shaped logprobs: one value per token, None where the sampler had none (here: the second token)
        logprobs = [[None if k == 1 else -0.25 for k in range(len(row))] for row in ids]
        return ids, logprobs

    trainer._generate_single_turn = scripted_single_turn
    trainer.use_vllm = True  # TRL's vLLM-only paths (importance sampling correction) on the scripted output
    trainer.vllm_generation = SimpleNamespace(mode="colocate", max_completion_length=64, temperature=1.0)
    trainer._last_loaded_step = trainer.state.global_step  # nothing to sync
    try:
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        batch = trainer._generate_and_score_completions([trainer.train_dataset[i] for i in (0, 0, 1, 1)])
        loss = trainer.compute_loss(trainer.model, batch)
        yield trainer, batch, loss, [tokenizer(turns[i], add_special_tokens=False)["input_ids"] for i in range(4)]
    finally:
        trainer.use_vllm = False
        trainer.close()


def test_budget_endings_are_masked_and_counted_as_truncated(scored):
    trainer, batch, loss, _ = scored
    episodes = trainer.rollout.last_episodes
    assert [ep.finish_reason for ep in episodes] == ["submitted", "submitted", "budget", "budget"]
    assert all(ep.completion_ids[-1] == trainer.processing_class.eos_token_id for ep in episodes)
    mask = batch["completion_mask"] * batch["tool_mask"]
    assert mask[2:].sum() == 0  # budget endings masked, as TRL masks truncated completions
    assert mask[:2].sum(dim=1).tolist() == [len(episodes[0].completion_ids), len(episodes[1].completion_ids)]
    assert batch["num_items_in_batch"].item() == mask.sum().item()
    metrics = trainer._metrics["train"]
    assert metrics["episode/truncated_rate"][-1] == 0.5
    assert metrics["completions/clipped_ratio"][-1] == 0.5
    assert torch.isfinite(loss)


def test_missing_sampler_logprobs_stay_nan_and_get_no_importance_correction(scored):
    trainer, batch, loss, _ = scored
    for ep in trainer.rollout.last_episodes:
        assert math.isnan(ep.logprobs[1]) and all(lp == -0.25 for k, lp in enumerate(ep.logprobs) if k != 1)
    sampling = batch["sampling_per_token_logps"]
    assert torch.isnan(sampling[:, 1]).all()  # not 0.0 (a claim that the sampler gave the token probability 1)
    ratio = batch["importance_sampling_ratio"]
    assert torch.equal(ratio[:2, 1], torch.ones(2))  # TRL neutralises NaN: no correction on that token
    assert not torch.equal(ratio[:2, 0], torch.ones(2))  # while known values are corrected
    assert torch.isfinite(loss)
