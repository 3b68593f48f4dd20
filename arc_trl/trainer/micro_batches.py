"""Less padding in the loss forwards: micro-batches grouped by length, each trimmed to its own longest episode.

TRL pads a generation batch once (prompts on the left, completions on the right, to the batch's longest), shuffles it
and splits it into micro-batches that keep that width: on the 0.6B learning step 36% of the tokens the loss forwards
computed on were padding (docs/benchmarks.md). Two steps remove most of it without changing the loss:

- `trim_padding`: drop the columns that are padding in every row of a micro-batch (leading prompt columns, trailing
  completion columns). Attention never sees them and the loss masks them; rotary positions shift by the same amount
  in every row, which attention does not see either (it depends on position differences only).
- `group_by_length`: re-split a generation batch so that episodes of similar length share a micro-batch. Exact when
  the loss of an optimizer step is a sum over micro-batches that does not depend on which rows share one
  (`grouping_keeps_loss`): TRL's dapo/cispo/vespo (normalised by the whole batch's token count), grpo/sapo/luspo/dr_grpo
  (means over equal-sized micro-batches), with every micro-batch of a generation batch in the same optimizer step.
"""

from __future__ import annotations

from typing import Any

import torch

PROMPT_KEYS = ("prompt_ids", "prompt_mask")  # (B, P); every other (B, C) tensor is aligned with the completion
# the losses whose value over an optimizer step is the same whichever rows share a micro-batch (equal-sized ones)
GROUPING_INVARIANT_LOSSES = ("dapo", "cispo", "vespo", "grpo", "sapo", "luspo", "dr_grpo")


def grouping_keeps_loss(args, entropy_bonus: bool) -> str | None:
    """Why grouping micro-batches by length would change what is learned under TRL's `args`, or None when it would
    not. `entropy_bonus`: TRL's entropy bonus is on (a per-micro-batch mean)."""
    steps_per_generation = args.steps_per_generation or args.gradient_accumulation_steps
    if args.gradient_accumulation_steps % steps_per_generation:
        return (f"a generation batch spans several optimizer steps (steps_per_generation {steps_per_generation} > "
                f"gradient_accumulation_steps {args.gradient_accumulation_steps})")
    if args.loss_type not in GROUPING_INVARIANT_LOSSES:
        return f"loss_type {args.loss_type} normalises per micro-batch"
    if args.top_entropy_quantile < 1.0:
        return "top_entropy_quantile < 1 takes its quantile per micro-batch"
    if entropy_bonus:
        return "the entropy bonus is a per-micro-batch mean"
    return None


def _row_lengths(batch: dict[str, Any]) -> torch.Tensor:
    return batch["prompt_mask"].sum(1) + batch["completion_mask"].sum(1)


def _take(value: Any, index: torch.Tensor) -> Any:
    if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
        return value
    if isinstance(value, torch.Tensor):
        return value[index.to(value.device)]
    return [value[i] for i in index.tolist()]


def _concat(values: list[Any]) -> Any:
    first = values[0]
    if first is None or (isinstance(first, torch.Tensor) and first.ndim == 0):
        return first  # per-batch scalars (num_items_in_batch) are copied into every micro-batch by TRL's split
    if isinstance(first, torch.Tensor):
        return torch.cat(values, dim=0)
    return [item for value in values for item in value]


def group_by_length(micro_batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of `micro_batches` (TRL's split of one generation batch) re-split into as many equal micro-batches,
    longest rows (prompt + completion tokens) first, each row's values kept together."""
    if len(micro_batches) < 2:
        return micro_batches
    keys = micro_batches[0].keys()
    whole = {key: _concat([batch[key] for batch in micro_batches]) for key in keys}
    order = torch.argsort(_row_lengths(whole).cpu(), descending=True, stable=True)
    size = len(order) // len(micro_batches)
    return [{key: _take(whole[key], order[i * size:(i + 1) * size]) for key in keys}
            for i in range(len(micro_batches))]


def trim_padding(batch: dict[str, Any]) -> dict[str, Any]:
    """`batch` without the prompt columns that are padding in every row (left) and the completion columns that are
    outside every row's attention mask (right); the same dict when there is nothing to trim."""
    prompt_mask, completion_mask = batch["prompt_mask"], batch["completion_mask"]
    rows, prompt_width, completion_width = prompt_mask.size(0), prompt_mask.size(1), completion_mask.size(1)
    used_prompt = prompt_mask.any(0).nonzero()
    start = int(used_prompt[0]) if len(used_prompt) else 0
    used_completion = completion_mask.any(0).nonzero()
    end = int(used_completion[-1]) + 1 if len(used_completion) else 1  # keep one column: TRL slices logits by width
    if start == 0 and end == completion_width:
        return batch
    trimmed = {}
    for key, value in batch.items():
        is_rows = isinstance(value, torch.Tensor) and value.ndim >= 2 and value.size(0) == rows
        if is_rows and key in PROMPT_KEYS:
            value = value[:, start:]
        elif is_rows and value.size(1) == completion_width:
            value = value[:, :end]
        trimmed[key] = value
    assert trimmed["prompt_ids"].size(1) == prompt_width - start
    return trimmed


def padding_fraction(batch: dict[str, Any]) -> float:
    """Share of the tokens a forward over `batch` computes on that are padding (for logs and benchmarks)."""
    real = float(_row_lengths(batch).sum())
    total = batch["prompt_mask"].numel() + batch["completion_mask"].numel()
    return 1.0 - real / total if total else 0.0
