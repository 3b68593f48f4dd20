"""The loss mask of a generation batch: which completion tokens enter the loss, and the checks on it.

TRL's batch (`GRPOTrainer._generate_and_score_completions`) carries `completion_mask` (0 on padding and on completions
TRL masks as truncated) and, with a rollout that returns `env_mask`, `tool_mask` (0 on environment tokens): the loss
sees their product.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Shaped
from torch import Tensor


class EmptyLossMaskError(RuntimeError):
    """A generation batch has no trainable token (the single-GPU prime-rl setup's "empty loss mask" failure)."""


def loss_mask(output: dict[str, Any]) -> Shaped[Tensor, "batch seq"]:
    """The tokens that enter the loss: `completion_mask`, times `tool_mask` when there is one."""
    mask = output["completion_mask"]
    if "tool_mask" in output:
        mask = mask * output["tool_mask"]
    return mask


def mask_truncated_episodes(output: dict[str, Any], episodes, accelerator) -> None:
    """Extend TRL's `mask_truncated_completions` to every episode cut by a token limit (`Episode.truncated`).

    TRL masks a completion whose last token is not EOS. An episode ended by the budget ("budget": its last turn
    ended, but the environment's reply did not fit) ends with EOS yet is cut all the same. Its rows are zeroed
    as TRL zeroes truncated ones (completion_mask and tool_mask) and `num_items_in_batch` is recounted."""
    cut = torch.tensor([ep.truncated for ep in episodes], device=output["completion_mask"].device)
    keep = (~cut).unsqueeze(1).to(output["completion_mask"].dtype)
    output["completion_mask"] = output["completion_mask"] * keep
    if output.get("tool_mask") is not None:
        output["tool_mask"] = output["tool_mask"] * keep
    output["num_items_in_batch"] = accelerator.gather(loss_mask(output).sum()).sum()


def check_loss_mask(output: dict[str, Any], episodes) -> None:
    """Raise `EmptyLossMaskError` when no token of the batch (all processes) enters the loss."""
    if output["num_items_in_batch"].item() > 0:
        return
    reasons = sorted({ep.finish_reason for ep in episodes})
    raise EmptyLossMaskError(
        "This generation batch has no trainable token: every model token is masked out of the loss "
        f"(episode endings here: {reasons}). Typical causes: all completions truncated while "
        "mask_truncated_completions=true (raise max_completion_length / max_tokens_per_turn or set "
        "mask_truncated_completions: false), or a rollout that marks no token as model-generated. "
        "Set check_loss_mask: false to skip such batches instead of stopping."
    )
