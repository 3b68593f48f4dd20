"""The LoRA weight sync leaves the base weights bit-identical (arc_trl/integrations/lora_merge.py).

TRL's `VLLMGeneration._iter_named_params` merges the adapter into the base in place and unmerges it at every sync;
in bf16 that rounds the base each time. The trainer replaces that walk with an out-of-place merge: vLLM gets the same
tensors TRL's first merge would give it, and the base never changes.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("vllm")  # TRL's VLLMGeneration module imports vLLM

SYNCS = 100


def _peft_trainer(model_dir, out, dtype: torch.dtype, use_vllm: bool = False):
    from peft import LoraConfig
    from trl import GRPOConfig, ModelConfig

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(max_turns=1, max_tokens_per_turn=16, sandbox_workers=1)
    vllm = {"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 2048} if use_vllm else {}
    args = GRPOConfig(output_dir=str(out), num_generations=2, per_device_train_batch_size=2, max_steps=1,
                      max_completion_length=16, use_cpu=True, bf16=False, report_to=[], seed=0, beta=0.0,
                      model_init_kwargs={"dtype": dtype}, **vllm)
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd"]), "repl", tokenizer=tokenizer)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
    trainer = ArcGRPOTrainer(str(model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer,
                             peft_config=lora)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a trained adapter: B is zero at init, which would merge nothing
        for name, param in trainer.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)
    return trainer


def _base_weights(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" not in name}


class LoadingEngine:
    """Stands in for a colocated `vllm.LLM`: keeps the last tensor loaded under each name."""

    def __init__(self) -> None:
        self.loaded: dict[str, torch.Tensor] = {}
        model = SimpleNamespace(load_weights=lambda weights: self.loaded.update(
            {name: tensor.clone() for name, tensor in weights}))
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=model))))

    def reset_prefix_cache(self) -> None:
        pass


def _vllm_generation(model, accelerator, engine):
    from trl.distributed import DistributedBackend
    from trl.generation.vllm_generation import VLLMGeneration

    vg = object.__new__(VLLMGeneration)  # TRL's class and its sync_weights; the engine records what it is given
    vg.__dict__.update(mode="colocate", enable_sleep_mode=False, llm=engine, model=model, accelerator=accelerator,
                       _dist=DistributedBackend(accelerator))
    return vg


def test_lora_sync_keeps_the_base_bit_identical_and_pushes_what_trl_merges(tiny_model_dir, tmp_path):
    from arc_trl.integrations.lora_merge import lora_layers
    from arc_trl.integrations.trl_internals import lossless_lora_sync

    trainer = _peft_trainer(tiny_model_dir, tmp_path / "run", torch.bfloat16)
    try:
        model = trainer.model
        reference = copy.deepcopy(model)  # TRL's own walk runs on this copy
        before = _base_weights(model)

        trl_engine = LoadingEngine()
        trl_vg = _vllm_generation(reference, trainer.accelerator, trl_engine)
        trl_vg.sync_weights()  # TRL's first merge: what vLLM should hold
        first_push = dict(trl_engine.loaded)

        engine = LoadingEngine()
        vg = _vllm_generation(model, trainer.accelerator, engine)
        assert lossless_lora_sync(vg) is None
        for _ in range(SYNCS):
            vg.sync_weights()

        after = _base_weights(model)
        changed = [name for name in before if not torch.equal(before[name], after[name])]
        assert changed == []  # bit-identical after 100 syncs
        assert engine.loaded.keys() == first_push.keys()  # the same names as TRL's walk
        for name, tensor in first_push.items():
            assert torch.equal(engine.loaded[name], tensor), name  # the same merged bits
        as_vllm = {n.removeprefix("base_model.model.").replace(".base_layer", ""): v for n, v in before.items()}
        merged = [n for n, tensor in first_push.items() if not torch.equal(tensor, as_vllm[n])]
        assert len(merged) == len(lora_layers(model)) > 0  # each LoRA layer's weight carries its nonzero delta

        # Control: TRL's in-place merge/unmerge moves the base of the copy (the defect this replaces). If a TRL
        # release stops doing so, this fails, and the override can go.
        for _ in range(SYNCS - 1):
            trl_vg.sync_weights()
        drifted = [name for name, value in _base_weights(reference).items() if not torch.equal(before[name], value)]
        assert drifted, "TRL's own LoRA sync no longer rounds the base: lossless_lora_sync may be unnecessary"
    finally:
        trainer.close()


@pytest.mark.vllm
def test_colocated_trainer_syncs_lora_out_of_place_into_vllm(tiny_model_dir, tmp_path):
    """The trainer installs the out-of-place walk on TRL's real colocated engine: after syncs the base is unchanged
    and the engine scores tokens like the merged policy, not like the base."""
    trainer = _peft_trainer(tiny_model_dir, tmp_path / "run", torch.float32, use_vllm=True)
    try:
        vg = trainer.vllm_generation
        assert "_iter_named_params" in vg.__dict__  # replaced on the instance
        model = trainer.model
        before = _base_weights(model)
        for _ in range(3):
            vg.sync_weights()
        assert all(torch.equal(before[n], v) for n, v in _base_weights(model).items())

        from vllm import SamplingParams

        prompt = trainer.processing_class("ARC grid 1 2 3", add_special_tokens=False)["input_ids"]
        sample = vg.llm.generate([{"prompt_token_ids": prompt}], SamplingParams(max_tokens=8, logprobs=0, seed=0),
                                 use_tqdm=False)[0].outputs[0]
        ids = torch.tensor([prompt + list(sample.token_ids)])
        engine_lps = torch.tensor([sample.logprobs[i][t].logprob for i, t in enumerate(sample.token_ids)])

        def policy_lps(adapter: bool) -> torch.Tensor:
            with torch.no_grad():
                if adapter:
                    logits = model(input_ids=ids).logits
                else:
                    with model.disable_adapter():
                        logits = model(input_ids=ids).logits
            lps = logits[0, len(prompt) - 1 : -1].float().log_softmax(-1)
            return lps.gather(-1, ids[0, len(prompt):, None]).squeeze(-1)

        merged_gap = (policy_lps(True) - engine_lps).abs().max().item()
        base_gap = (policy_lps(False) - engine_lps).abs().max().item()
        # vLLM's "auto" dtype runs a float32 checkpoint in bf16: its log-probs carry bf16 rounding of logits of order
        # 1 (2^-8 relative, a few 1e-3 nats a token); the random adapter moves them by tenths of a nat.
        assert merged_gap < 0.05
        assert base_gap > 10 * merged_gap  # the engine holds the merged policy, not the base
    finally:
        trainer.close()
