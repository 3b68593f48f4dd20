"""Build a tiny random-init Qwen3 model plus a locally trained byte-level BPE tokenizer, with no network access.

Used by the CPU demo and the tests. The tokenizer carries the project's prefix-stable ChatML template (see
`arc_trl.chat_template`), `<|im_end|>` as end-of-turn/EOS and `<|endoftext|>` as padding, like Qwen3.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass
class TinyModelSpec:
    """Shape of the tiny model. head_dim must be 64: vLLM's CPU attention rejects smaller heads."""

    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    head_dim: int = 64
    max_position_embeddings: int = 8192
    tie_word_embeddings: bool = True
    seed: int = 0
    dtype: str = "float32"


# Real Qwen3 shapes (random init, our local tokenizer; the embedding keeps the real vocabulary size) for GPU runs.
SHAPES: dict[str, dict] = {
    "tiny": {},
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                       tie_word_embeddings=True, dtype="bfloat16"),
    "qwen3-1.7b": dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                       tie_word_embeddings=True, dtype="bfloat16"),
    "qwen3-8b": dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                     tie_word_embeddings=False, dtype="bfloat16"),
}


def shape_spec(shape: str, seed: int = 0) -> "TinyModelSpec":
    """The `TinyModelSpec` of a named shape (`SHAPES`)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    return TinyModelSpec(seed=seed, **SHAPES[shape])


def _tokenizer_corpus(seed: int, extra_texts: list[str] | None = None) -> list[str]:
    """Text the BPE merges are learned from: ARC-style prompts, grids and Python code, so they encode compactly."""
    from arc_trl.data.grid_format import format_grid  # local import: keeps this module light

    rng = random.Random(seed)
    texts = list(extra_texts or [])
    code = [
        "import numpy as np\n",
        "def transform(grid):\n    grid = np.array(grid)\n    return grid.tolist()\n",
        "for i, (inp, out) in enumerate(zip(train_inputs, train_outputs)):\n    print(i, np.array(inp).shape)\n",
        "SUBMIT([np.rot90(np.array(g)).tolist() for g in test_inputs])\n",
        "```python\nprint(len(train_inputs))\n```\n",
        "result = np.flip(np.array(x), axis=0)\nprint(result)\n",
        "Traceback (most recent call last):\n  File \"<cell>\", line 1, in <module>\n"
        "NameError: name 'x' is not defined\n",
        "colors = np.unique(grid)\nmask = grid == 0\nout = np.where(mask, 5, grid)\n",
        "Train pair 1\nInput:\nOutput:\nTest input 1\n",
        "You are an expert ARC solver. Write Python code in ```python blocks. Call SUBMIT(...) with your answer.\n",
    ]
    for _ in range(400):
        h, w = rng.randint(1, 12), rng.randint(1, 12)
        grid = [[rng.randint(0, 9) for _ in range(w)] for _ in range(h)]
        texts.append(format_grid(grid))
        texts.append(rng.choice(code))
    return texts


def build_tokenizer(out_dir: str | Path | None = None, vocab_size: int = 2048, seed: int = 0, extra_texts=None):
    """Train a byte-level BPE tokenizer locally and wrap it as a `PreTrainedTokenizerFast` with the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from arc_trl.chat_template import CHATML_TEMPLATE

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_tokenizer_corpus(seed, extra_texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        padding_side="left",
    )
    fast.chat_template = CHATML_TEMPLATE
    if out_dir is not None:
        fast.save_pretrained(str(out_dir))
    return fast


def build_tiny_model(
    out_dir: str | Path, spec: TinyModelSpec | None = None, tokenizer_texts=None, device: str | None = None
) -> Path:
    """Write a random-init Qwen3-architecture causal LM and its tokenizer to `out_dir`; return the path.

    The tokenizer is always the small local BPE one; a larger `spec.vocab_size` (real shapes) only leaves embedding
    rows unused. `device="cuda"` initialises big shapes on the GPU (seconds instead of minutes).
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    spec = spec or TinyModelSpec()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out_dir, min(spec.vocab_size, 2048), spec.seed, tokenizer_texts)
    torch.manual_seed(spec.seed)
    config = Qwen3Config(
        vocab_size=max(len(tokenizer), spec.vocab_size),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        dtype=spec.dtype,
    )
    with torch.device(device or "cpu"):
        model = Qwen3ForCausalLM(config).to(getattr(torch, spec.dtype))
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, do_sample=True
    )
    model.save_pretrained(str(out_dir))
    (out_dir / "arc_trl_tiny_spec.json").write_text(json.dumps(spec.__dict__, indent=2))
    return out_dir
