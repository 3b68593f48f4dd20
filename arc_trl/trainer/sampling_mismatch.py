"""Which model tokens TRL's vLLM importance-sampling correction masks (weight 0) or clips.

TRL 1.16 (`GRPOTrainer._generate_and_score_completions`, `vllm_importance_sampling_correction`) reweights each
model token's loss by exp(logp_trainer - logp_vllm), with env/padding tokens given a difference of 0 and NaN sampler
log-probs counted as 0. `*_mask` modes set ratios outside [clip_min, clip_max] to 0, `*_truncate` modes clamp them;
`sequence_*` modes apply one ratio, exp(sum of the token differences), to the whole sequence. This module repeats that
computation to say which tokens were hit, so the trainer can log the share (`sampling/masked_frac` etc.).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Shaped
from torch import Tensor

IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass
class MismatchCounts:
    model_tokens: int
    masked_tokens: int  # model tokens whose IS weight is 0 (`*_mask` modes)
    clipped_tokens: int  # model tokens whose IS ratio was clamped (`*_truncate` modes)
    episodes: int  # sequences with at least one model token
    masked_episodes: int  # sequences with at least one masked model token
    clipped_episodes: int  # sequences with at least one clipped model token


def importance_sampling_ratio(
    trainer_logps: Float[Tensor, "batch seq"],
    sampler_logps: Float[Tensor, "batch seq"],  # NaN where the sampler gave no value
    model_mask: Shaped[Tensor, "batch seq"],
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> Float[Tensor, "batch seq_or_1"]:
    """TRL 1.16's vLLM importance-sampling ratio (`_generate_and_score_completions`), op for op: (B, T) in `token_*`
    modes, (B, 1) in `sequence_*` modes (`defer_old_logps` computes it at loss time with this)."""
    if mode not in IS_MODES:
        raise ValueError(f"vllm_importance_sampling_mode={mode!r} is not one of {', '.join(IS_MODES)}")
    diff = torch.nan_to_num((trainer_logps - sampler_logps) * model_mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < low) | (ratio > high), value=0.0)


def importance_sampling_hits(
    trainer_logps: Float[Tensor, "batch seq"],
    sampler_logps: Float[Tensor, "batch seq"],  # NaN where the sampler gave no value
    model_mask: Shaped[Tensor, "batch seq"],  # 1 on model tokens (any dtype)
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> tuple[Bool[Tensor, "batch seq"], Bool[Tensor, "batch seq"]]:
    """(masked, clipped): (B, T) bool tensors over model tokens, as TRL 1.16 computes the ratio."""
    if mode not in IS_MODES:
        raise ValueError(f"vllm_importance_sampling_mode={mode!r} is not one of {', '.join(IS_MODES)}")
    mask = model_mask.bool()
    diff = torch.nan_to_num((trainer_logps - sampler_logps) * model_mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    outside = ((ratio < low) | (ratio > high)).expand_as(mask) & mask
    none = torch.zeros_like(mask)
    return (outside, none) if mode.endswith("mask") else (none, outside)


def mismatch_counts(
    masked: Bool[Tensor, "batch seq"], clipped: Bool[Tensor, "batch seq"], model_mask: Shaped[Tensor, "batch seq"]
) -> MismatchCounts:
    mask = model_mask.bool()
    has_tokens = mask.any(dim=-1)
    return MismatchCounts(
        model_tokens=int(mask.sum()),
        masked_tokens=int(masked.sum()),
        clipped_tokens=int(clipped.sum()),
        episodes=int(has_tokens.sum()),
        masked_episodes=int(masked.any(dim=-1).sum()),
        clipped_episodes=int(clipped.any(dim=-1).sum()),
    )
