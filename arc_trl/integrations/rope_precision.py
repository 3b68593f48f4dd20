"""Rotary-embedding inverse frequencies in float32, as transformers and vLLM compute them.

Under DeepSpeed ZeRO-3 with `zero3_init_flag: true`, transformers builds the model inside `deepspeed.zero.Init`,
which turns every floating tensor created in a module's `__init__` into the training dtype. The rotary embedding's
`inv_freq` (a non-persistent buffer, computed, never loaded) is then computed and kept in bf16: relative errors of
4e-3 to 6e-3 (Qwen3 shapes), so the angle `position * inv_freq` is off by several radians for the fast frequencies
at the positions of an ARC episode (thousands). The trainer's log-probs then drift from vLLM's (which computes RoPE
in float32) more with every position. On CPU this was the one difference between the trainer's log-probs under
ZeRO-3 and under DDP or ZeRO-2 (bit-identical once restored): the explanation found for the ZeRO-3 sampler/trainer
gap measured with Qwen3-8B (0.32-0.40 against 0.064). transformers' own `_init_weights` recomputes the buffer but
copies it into the bf16 tensor; DeepSpeed's engine keeps float32 buffers float32, so restoring once after loading
holds.
"""

from __future__ import annotations

import torch
from torch import nn


def _rope_function(module: nn.Module):
    """The function that computes `module`'s inverse frequencies (transformers' `_init_weights` picks it alike)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope_type = getattr(module, "rope_type", None)
    if rope_type == "default":
        return getattr(module, "compute_default_rope_parameters", None)
    if rope_type == "axial":
        return getattr(module, "compute_axial_rope_parameters", None)
    return ROPE_INIT_FUNCTIONS.get(rope_type)


def restore_fp32_rope(model: nn.Module) -> list[str]:
    """Recompute in float32 the `inv_freq` (and `original_inv_freq`) of every rotary embedding of `model` that holds
    them in another dtype; return the names of the modules restored (none: nothing to do, e.g. without ZeRO-3).
    A rotary embedding whose frequencies cannot be recomputed (an unknown `rope_type`) raises: training on with
    low-precision positions would silently bias every log-prob."""
    restored = []
    for name, module in model.named_modules():
        inv_freq = getattr(module, "inv_freq", None)
        if not isinstance(inv_freq, torch.Tensor) or inv_freq.dtype == torch.float32:
            continue
        rope_function = _rope_function(module)
        if rope_function is None or not hasattr(module, "config"):
            raise ValueError(f"{name or type(module).__name__}: its rotary inv_freq is {inv_freq.dtype} (DeepSpeed "
                             f"ZeRO-3's zero.Init?) and its rope_type {getattr(module, 'rope_type', None)!r} is not "
                             "one arc-trl can recompute in float32; set zero3_init_flag: false in the accelerate "
                             "config")
        value, _ = rope_function(module.config)
        value = value.to(device=inv_freq.device, dtype=torch.float32)
        module.inv_freq = value  # an existing buffer: stays a buffer, persistence unchanged
        if isinstance(getattr(module, "original_inv_freq", None), torch.Tensor):
            module.original_inv_freq = value.clone()
        restored.append(name)
    left = [name for name, buffer in model.named_buffers()
            if name.endswith("inv_freq") and buffer.is_floating_point() and buffer.dtype != torch.float32]
    if left:  # e.g. per-layer-type frequencies (`{layer_type}_inv_freq`), which this does not recompute
        raise ValueError(f"rotary frequencies {', '.join(left[:3])} are not float32 (DeepSpeed ZeRO-3's zero.Init?) "
                         "and arc-trl cannot recompute them; set zero3_init_flag: false in the accelerate config")
    return restored
