"""Shared set-up of the CPU benchmarks: a random-init Qwen3 of a given size and real ARC prompts."""

from __future__ import annotations

import tempfile
from pathlib import Path


def build_bench_model(layers: int, hidden: int, prefix: str) -> Path:
    """A random-init Qwen3 with `layers` x `hidden` (head_dim 64, GQA 2:1) in a fresh temp folder."""
    from arc_trl.models.tiny_model import TinyModelSpec, build_tiny_model

    spec = TinyModelSpec(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=3 * hidden,
                         num_attention_heads=hidden // 64, num_key_value_heads=max(1, hidden // 128))
    return build_tiny_model(Path(tempfile.mkdtemp(prefix=prefix)) / "model", spec)


def arc_prompts(tokenizer, count: int, max_tokens: int) -> list[list[int]]:
    """Token ids of the first `count` ARC-AGI-1 training REPL prompts no longer than `max_tokens`."""
    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import render_messages
    from arc_trl.tasks import load_tasks

    prompts = []
    for task in load_tasks("arc-agi-1/train"):
        ids = prompt_ids(tokenizer, render_messages(task, "repl"))
        if len(ids) <= max_tokens:
            prompts.append(ids)
        if len(prompts) == count:
            break
    return prompts
