"""FP8 rollouts: the vLLM engine settings of `vllm_rollout_dtype` and `vllm_kv_cache_dtype` (docs/fp8.md).

The trainer stays bf16; only the engine that samples the rollouts holds FP8 weights (vLLM's online quantization of
the bf16 checkpoint: per-tensor weight scales, dynamic activation scales) and, optionally, an FP8 KV cache (scale 1.0:
the pushed weights carry no calibrated K/V scales). The same settings reach a colocated engine (`engine_kwargs`, added
to the `vllm.LLM` TRL builds, `trl_internals.colocated_engine_kwargs`) and the student server (`server_args`, on its
`trl vllm-serve` command line, `arc_trl/launch/server_plan.py`). Each weight sync must quantize the step's weights
again: `trl_internals.requantize_on_sync` (colocated); a server does it in vLLM's weight-transfer engine.
"""

from __future__ import annotations

import logging

from arc_trl.config.warn_once import warn_once

logger = logging.getLogger(__name__)

ROLLOUT_DTYPES = ("bf16", "fp8")
KV_CACHE_DTYPES = ("auto", "fp8")
# vLLM 0.26-0.31: online per-tensor FP8 of a bf16 checkpoint (Fp8PerTensorOnlineLinearMethod); 0.31 calls "fp8"
# deprecated for this and maps it to "fp8_per_tensor", a name 0.26 knows too (docs/fp8.md)
VLLM_QUANTIZATION = "fp8"


def check_choices(rollout_dtype: str, kv_cache_dtype: str) -> None:
    """ValueError naming the key whose value is not a choice."""
    if rollout_dtype not in ROLLOUT_DTYPES:
        raise ValueError(f"vllm_rollout_dtype={rollout_dtype!r} is not one of {', '.join(ROLLOUT_DTYPES)}")
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"vllm_kv_cache_dtype={kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}")


def sequence_is_warning(rollout_dtype: str, use_vllm: bool, correction: bool, mode: str) -> str | None:
    """The warning for FP8 rollouts under a sequence-level importance-sampling ratio, else None. TRL's `sequence_*`
    modes weigh an episode by exp(sum of its tokens' trainer - sampler log-prob differences): under FP8 sampling that
    sum drifts with the episode's length (docs/fp8.md: on SmolLM2-135M on an H100 it stayed usable; a CPU emulation,
    benchmarks/fp8_gap_cpu.py, overstated the gap)."""
    if rollout_dtype != "fp8" or not use_vllm or not correction or not mode.startswith("sequence"):
        return None
    return (f"vllm_rollout_dtype: fp8 with vllm_importance_sampling_mode: {mode}: each episode is weighted by exp(sum "
            "of its tokens' sampler/trainer gaps), which drifts with the episode's length. On SmolLM2-135M (H100, 20 "
            "steps) FP8 raised the masked share to 0.5-1.8% of tokens (bf16: <= 0.15%) and one run's smallest weight "
            "to 6e-7, with no measured gain from token_truncate; for long episodes or larger models consider "
            "vllm_importance_sampling_mode: token_truncate and watch sampling/importance_sampling_ratio/min "
            "(docs/fp8.md)")


def warn_sequence_is(rollout_dtype: str, use_vllm: bool, correction: bool, mode: str) -> str | None:
    """Log `sequence_is_warning` once per process; return it."""
    message = sequence_is_warning(rollout_dtype, use_vllm, correction, mode)
    if message:
        warn_once(logger, f"config: {message}")
    return message


def engine_kwargs(rollout_dtype: str, kv_cache_dtype: str) -> dict[str, str]:
    """The `vllm.LLM(...)` keyword arguments of these settings (empty for bf16 weights and an `auto` KV cache)."""
    check_choices(rollout_dtype, kv_cache_dtype)
    kwargs = {}
    if rollout_dtype == "fp8":
        kwargs["quantization"] = VLLM_QUANTIZATION
    if kv_cache_dtype != "auto":
        kwargs["kv_cache_dtype"] = kv_cache_dtype
    return kwargs


def server_args(rollout_dtype: str, kv_cache_dtype: str, given: list[str]) -> list[str]:
    """The `trl vllm-serve` arguments of these settings (`--quantization` is forwarded to `vllm serve`;
    `--kv_cache_dtype` is TRL's own). `given`: the config's `vllm_server_args`, which must not set either itself."""
    kwargs = engine_kwargs(rollout_dtype, kv_cache_dtype)
    clashes = {"quantization": ("--quantization", "-q"), "kv_cache_dtype": ("--kv_cache_dtype", "--kv-cache-dtype")}
    args = []
    for key, value in kwargs.items():
        flags = clashes[key]
        if any(arg in flags or arg.startswith(tuple(f"{flag}=" for flag in flags)) for arg in given):
            setting = "vllm_rollout_dtype" if key == "quantization" else "vllm_kv_cache_dtype"
            raise ValueError(f"vllm_server_args sets {flags[0]} and {setting}={value!r} sets it too: use {setting} "
                             "alone")
        args += [flags[0], value]
    return args

