"""Rotary frequencies built in bf16 (as DeepSpeed ZeRO-3's zero.Init builds them) are recomputed in float32
(arc_trl/integrations/rope_precision.py), giving back the log-probs of a normally loaded model bit for bit."""

from __future__ import annotations

import copy

import pytest
import torch

from arc_trl.integrations.rope_precision import restore_fp32_rope


def _model():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=4096)
    return Qwen3ForCausalLM(config).eval()


def zero_init_rope(model) -> None:
    """What zero.Init leaves in a rotary embedding: its tensor constructors return the training dtype (bf16), so
    `compute_default_rope_parameters`' arange and the arithmetic on it run in bf16."""
    rotary = model.model.rotary_emb
    base, dim = rotary.config.rope_parameters["rope_theta"], rotary.config.head_dim
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float).to(torch.bfloat16) / dim))
    rotary.inv_freq, rotary.original_inv_freq = inv_freq, inv_freq.clone()


def _token_logps(model, ids):
    with torch.no_grad():
        logps = model(input_ids=ids).logits.float().log_softmax(-1)[0, :-1]
    return logps.gather(-1, ids[0, 1:, None]).squeeze(-1)


def test_bf16_rotary_frequencies_are_recomputed_in_float32_bit_for_bit():
    model = _model()
    reference = copy.deepcopy(model)
    ids = torch.randint(0, 256, (1, 2048), generator=torch.Generator().manual_seed(0))
    expected = _token_logps(reference, ids)

    zero_init_rope(model)
    degraded = (_token_logps(model, ids) - expected).abs()
    # Control: bf16 frequencies move the log-probs, more at later positions (angle error = position * freq error).
    assert degraded[1024:].mean() > degraded[:64].mean() > 0

    assert restore_fp32_rope(model) == ["model.rotary_emb"]
    rotary = model.model.rotary_emb
    assert rotary.inv_freq.dtype == rotary.original_inv_freq.dtype == torch.float32
    assert torch.equal(rotary.inv_freq, reference.model.rotary_emb.inv_freq)
    assert torch.equal(rotary.original_inv_freq, reference.model.rotary_emb.original_inv_freq)
    assert "inv_freq" in dict(rotary.named_buffers())  # still a (non-persistent) buffer
    assert "model.rotary_emb.inv_freq" not in model.state_dict()
    assert torch.equal(_token_logps(model, ids), expected)
    assert restore_fp32_rope(model) == []  # float32 already: nothing to do


def test_frequencies_it_cannot_recompute_are_an_error_not_a_silent_bias():
    model = _model()
    zero_init_rope(model)
    model.model.rotary_emb.rope_type = "unknown-rope"
    with pytest.raises(ValueError, match="zero3_init_flag: false"):
        restore_fp32_rope(model)
