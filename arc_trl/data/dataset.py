"""Turn ARC tasks into the `datasets.Dataset` that GRPO trains on.

Columns:

- `prompt`: the chat messages `[system, user]` (`render_messages`),
- `task_id`: the id of the rendered task (augmented tasks: `"<id>|<augmentation>"`),
- `task_json`: `task_to_json_string(task)`: the standard ARC JSON *with* test outputs (rewards need them; the sandbox
  strips them before the model's code sees the task), plus a `"metadata"` object when the task has metadata (e.g.
  `reference_program` for the privileged teacher, `original_id`/`augmentation` for augmented tasks); read it back
  with `task_from_json_string`,
- `augmentation`: the augmentation string (`Augmentation.to_string()`), "" for the original task,
- `teacher_prompt` (only when `privileged` is set): the privileged messages for the distillation teacher.

With a tokenizer and `max_prompt_tokens`, prompts longer than the limit (chat template applied with the generation
prompt) are dropped; `PromptLengthReport` says how many were kept and dropped and the longest prompt.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arc_trl.data.augment import Augmentation, random_augmentation
from arc_trl.data.prompts import AgentMode, Privileged, PromptTemplate, load_template, render_messages
from arc_trl.data.task import ArcTask

logger = logging.getLogger(__name__)


@dataclass
class PromptLengthReport:
    """Prompt lengths in tokens (chat template + generation prompt) and what a length limit keeps."""

    max_prompt_tokens: int | None
    num_kept: int
    num_dropped: int
    longest_tokens: int  # longest prompt of all, kept or not
    longest_task_id: str
    longest_kept_tokens: int  # 0 when nothing is kept
    dropped_task_ids: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        limit = "no limit" if self.max_prompt_tokens is None else f"limit {self.max_prompt_tokens} tokens"
        return (
            f"prompt lengths ({limit}): kept {self.num_kept}, dropped {self.num_dropped}; longest prompt "
            f"{self.longest_tokens} tokens ({self.longest_task_id}), longest kept {self.longest_kept_tokens}"
        )


def count_prompt_tokens(prompts: Sequence[list[dict[str, str]]], tokenizer: Any) -> list[int]:
    """Token count of each conversation with the chat template applied and the generation prompt added."""
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    if not texts:
        return []
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def prompt_length_report(
    prompts: Sequence[list[dict[str, str]]],
    tokenizer: Any,
    max_prompt_tokens: int | None = None,
    task_ids: Sequence[str] | None = None,
) -> PromptLengthReport:
    """Measure every prompt and report what `max_prompt_tokens` would keep and drop."""
    lengths = count_prompt_tokens(prompts, tokenizer)
    ids = list(task_ids) if task_ids is not None else [str(i) for i in range(len(prompts))]
    return _report(lengths, ids, max_prompt_tokens)


def expand_tasks(
    tasks: Iterable[ArcTask], augment: bool | dict[str, Any] = False, copies: int = 1, seed: int = 0
) -> list[ArcTask]:
    """The rows' tasks. Without `augment`: each task once. With `augment`: `copies` rows per task, each a distinct
    random augmentation (`random_augmentation`; a dict `augment` gives its options, e.g.
    `{"permute_background": True}`).
    A random draw may be the identity, which leaves the task as is. Deterministic for a seed."""
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    if not augment:
        if copies != 1:
            raise ValueError(f"copies={copies} needs augment=True (identical copies of a prompt add nothing)")
        return list(tasks)
    options = augment if isinstance(augment, dict) else {}
    rng = random.Random(seed)
    out = []
    for task in tasks:
        seen: set[Augmentation] = set()
        for _ in range(copies):
            aug = _draw_new(rng, seen, options)
            if aug is None:
                break  # fewer distinct augmentations exist than requested (geometry only: 8)
            seen.add(aug)
            out.append(aug.apply_task(task))
    return out


def build_dataset(
    tasks: Iterable[ArcTask],
    mode: AgentMode,
    template: PromptTemplate | str | Path | None = None,
    tokenizer: Any = None,
    max_prompt_tokens: int | None = None,
    *,
    augment: bool | dict[str, Any] = False,
    copies: int = 1,
    seed: int = 0,
    privileged: Privileged = False,
    return_report: bool = False,
):
    """Build the training dataset (columns in the module docstring); `augment`, `copies`, `seed`: `expand_tasks`.

    Returns the `datasets.Dataset`, or `(dataset, PromptLengthReport | None)` with `return_report=True` (the report
    needs a tokenizer). The report is also logged. Raises ValueError when every prompt is over the limit.
    """
    from datasets import Dataset

    if max_prompt_tokens is not None and tokenizer is None:
        raise ValueError("max_prompt_tokens needs a tokenizer to count prompt tokens")
    template = load_template(template, mode)
    tasks = expand_tasks(tasks, augment, copies, seed)
    if not tasks:
        raise ValueError("build_dataset got no tasks")
    rows = [_row(task, mode, template, privileged) for task in tasks]

    report = None
    if tokenizer is not None:
        lengths = count_prompt_tokens([r["prompt"] for r in rows], tokenizer)
        report = _report(lengths, [r["task_id"] for r in rows], max_prompt_tokens)
        logger.info("%s", report)
        if max_prompt_tokens is not None:
            if report.num_kept == 0:
                raise ValueError(
                    f"all {len(rows)} prompts are longer than max_prompt_tokens={max_prompt_tokens} "
                    f"(shortest: {min(lengths)} tokens)"
                )
            rows = [r for r, n in zip(rows, lengths) if n <= max_prompt_tokens]

    columns = {key: [r[key] for r in rows] for key in rows[0]}
    dataset = Dataset.from_dict(columns)
    return (dataset, report) if return_report else dataset


def task_to_json_string(task: ArcTask) -> str:
    """The `task_json` column: standard ARC JSON with test outputs, plus `"metadata"` when the task has any."""
    obj = task.to_json()
    if task.metadata:
        obj["metadata"] = task.metadata
    return json.dumps(obj)


def task_from_json_string(text: str, task_id: str, source: str | None = "task_json") -> ArcTask:
    """Inverse of `task_to_json_string` (metadata such as `reference_program` restored)."""
    obj = json.loads(text)
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    return ArcTask.from_json(task_id, obj, source=source, metadata=metadata if isinstance(metadata, dict) else None)


def _row(task: ArcTask, mode: AgentMode, template: PromptTemplate, privileged: Privileged) -> dict[str, Any]:
    row = {
        "prompt": render_messages(task, mode, template),
        "task_id": task.id,
        "task_json": task_to_json_string(task),
        "augmentation": task.metadata.get("augmentation", ""),
    }
    if privileged and privileged != "none":
        row["teacher_prompt"] = render_messages(task, mode, template, privileged=privileged)
    return row


def _report(lengths: list[int], task_ids: list[str], max_prompt_tokens: int | None) -> PromptLengthReport:
    if not lengths:
        return PromptLengthReport(max_prompt_tokens, 0, 0, 0, "", 0)
    keep = [max_prompt_tokens is None or n <= max_prompt_tokens for n in lengths]
    longest = max(range(len(lengths)), key=lambda i: lengths[i])
    kept_lengths = [n for n, k in zip(lengths, keep) if k]
    return PromptLengthReport(
        max_prompt_tokens=max_prompt_tokens,
        num_kept=sum(keep),
        num_dropped=len(keep) - sum(keep),
        longest_tokens=lengths[longest],
        longest_task_id=task_ids[longest],
        longest_kept_tokens=max(kept_lengths, default=0),
        dropped_task_ids=[t for t, k in zip(task_ids, keep) if not k],
    )


def _draw_new(rng: random.Random, seen: set[Augmentation], kwargs: dict[str, Any]) -> Augmentation | None:
    for _ in range(100):
        aug = random_augmentation(rng, **kwargs)
        if aug not in seen:
            return aug
    return None
