"""Tiny GGUF files written with the `gguf` package, as llama.cpp's converter writes them (for the importer's tests):
a llama model with a byte-level BPE tokenizer whose EOS field is the ChatML end-of-turn token, which transformers'
GGUF tokenizer conversion turns into EOS `<|im_start|>` (as it does for SmolLM2-135M-Instruct's file)."""

import json
import numpy as np
import gguf


def write_tiny_llama_gguf(
    path,
    tokenizer,
    *,
    arch="llama",
    eos="<|im_end|>",
    q8_tensor=True,
    odd_type=None,
    tied=False,
    q4_1=False,
    head_rounding_of_embedding=False,
    seed=0,
    hidden=64,
    layers=2,
    heads=4,
    kv_heads=2,
    ffn=128,
):
    """`odd_type`: a gguf.GGMLQuantizationType to store one norm weight in (zero bytes), to test refusals. `tied`: no
    `output.weight` (the LM head is the embedding); `q4_1`: the block matrices in Q4_1 and the embedding in Q8_0 (the
    two, as in SmolLM2-135M-Instruct's file); `head_rounding_of_embedding`: `output.weight` is the embedding matrix in
    Q8_0 and `token_embd.weight` the same matrix in Q5_0 (a tied model's file as Qwen2.5-Coder's GGUF files are)."""
    rng = np.random.default_rng(seed)
    vocab = tokenizer.backend_tokenizer.get_vocab()  # token -> id
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    special = set(tokenizer.all_special_tokens)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("tiny")
    w.add_context_length(512)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|im_start|>"])
    w.add_eos_token_id(vocab[eos])
    w.add_pad_token_id(vocab[eos])
    w.add_chat_template(tokenizer.chat_template.replace("{%- generation %}", "").replace("{%- endgeneration %}", ""))
    n = len(tokens)
    hd = hidden // heads

    def t(name, shape, quant=False):
        data = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        kind = gguf.GGMLQuantizationType.Q8_0 if quant is True else quant
        if kind:
            w.add_tensor(name, gguf.quants.quantize(data, kind), raw_dtype=kind)
        else:
            w.add_tensor(name, data)

    matrices = gguf.GGMLQuantizationType.Q4_1 if q4_1 else False
    if head_rounding_of_embedding:
        embedding = (rng.standard_normal((n, hidden)) * 0.05).astype(np.float32)
        for name, kind in (("token_embd.weight", gguf.GGMLQuantizationType.Q5_0),
                           ("output.weight", gguf.GGMLQuantizationType.Q8_0)):
            w.add_tensor(name, gguf.quants.quantize(embedding, kind), raw_dtype=kind)
        tied = True  # no other output.weight below
    else:
        t("token_embd.weight", (n, hidden), quant=q4_1)
    for i in range(layers):
        if odd_type is not None and i == 0:
            block, size = gguf.GGML_QUANT_SIZES[odd_type]  # the bytes of `hidden` values (raw: byte shape)
            w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros(hidden // block * size, dtype=np.uint8), raw_dtype=odd_type)
        else:
            t(f"blk.{i}.attn_norm.weight", (hidden,))
        t(f"blk.{i}.ffn_norm.weight", (hidden,))
        t(f"blk.{i}.attn_q.weight", (heads * hd, hidden), quant=matrices)
        t(f"blk.{i}.attn_k.weight", (kv_heads * hd, hidden), quant=matrices)
        t(f"blk.{i}.attn_v.weight", (kv_heads * hd, hidden), quant=(q8_tensor and i == 0) or matrices)
        t(f"blk.{i}.attn_output.weight", (hidden, heads * hd), quant=matrices)
        t(f"blk.{i}.ffn_gate.weight", (ffn, hidden), quant=matrices)
        t(f"blk.{i}.ffn_up.weight", (ffn, hidden), quant=matrices)
        t(f"blk.{i}.ffn_down.weight", (hidden, ffn), quant=matrices)
    t("output_norm.weight", (hidden,))
    if not tied:
        t("output.weight", (n, hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
