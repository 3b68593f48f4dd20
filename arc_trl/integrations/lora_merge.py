"""A PEFT LoRA model's merged weights, computed into new tensors: the base weights are never written.

TRL pushes a LoRA policy to vLLM by merging the adapter into the base weights in place and unmerging it afterwards
(`VLLMGeneration._iter_named_params`: `merge_adapter()`, read, `unmerge_adapter()`). In bf16, `W + d - d` is not
`W`: every sync rounds the frozen base a little, a random walk that moves the base the adapter was trained on (and
the `teacher_backend: base` teacher). Here each LoRA layer's weight is yielded as `W + delta`, computed out of place
with PEFT's own `get_delta_weight` and the same addition PEFT's merge makes, so vLLM receives what TRL's first merge
would have given it, and `W` stays bit-identical however many syncs run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch import nn


def lora_layers(model: nn.Module) -> list[nn.Module]:
    """The PEFT LoRA layers of `model` (every module with `lora_A` or `lora_embedding_A` adapters)."""
    from peft.tuners.lora import LoraLayer

    return [module for module in model.modules() if isinstance(module, LoraLayer)]


def unsupported_lora(model: nn.Module) -> str | None:
    """Why `merged_named_params` cannot serve `model` (None when it can). Served: PEFT's plain `Linear`, `Embedding`
    and convolution LoRA layers on ordinary (unquantized) weights, one layer per base weight. Not: LoRA variants
    (DoRA and others merge by their own rules), other layer types (e.g. `MultiheadAttention`, `ParamWrapper`),
    quantized bases (bitsandbytes packs them), a base weight shared by two LoRA layers."""
    from peft.tuners.lora import layer as lora

    served = (lora.Linear, lora.Embedding, lora._ConvNd)
    seen: set[int] = set()
    for module in lora_layers(model):
        if not isinstance(module, served):
            return f"{type(module).__name__} LoRA layers (served: Linear, Embedding, Conv)"
        variants = getattr(module, "lora_variant", {}) or {}
        if any(adapter in variants for adapter in module.active_adapters):
            return f"{type(module).__name__} uses a LoRA variant ({', '.join(sorted(variants))}), e.g. DoRA"
        weight = getattr(module.get_base_layer(), "weight", None)
        if not isinstance(weight, torch.Tensor) or not weight.dtype.is_floating_point:
            return f"{type(module).__name__} on a {type(weight).__name__} base weight (quantized?)"
        if id(weight) in seen:
            return "a base weight shared by two LoRA layers"
        seen.add(id(weight))
    return None


def merged_value(module: nn.Module, param: nn.Parameter) -> torch.Tensor | None:
    """`param` (the base weight or bias of the LoRA layer `module`) with the active adapters merged into a copy, in
    the order and with the operations of PEFT's own `merge` for that layer type, so the bits equal an in-place
    merge's: `Linear` and the convolutions add the (possibly float32) delta in place, one rounding; `Embedding`
    rounds the delta to the weight's dtype first; with `lora_bias`, `bias += B.bias * scaling`. None when nothing
    is merged into it (adapters disabled, or already merged in place)."""
    from peft.tuners.lora import layer as lora

    if getattr(module, "disable_adapters", False) or getattr(module, "merged", False):
        return None
    is_weight = param is module.get_base_layer().weight
    value = None
    for adapter in module.active_adapters:
        if adapter not in getattr(module, "lora_A", {}) and adapter not in getattr(module, "lora_embedding_A", {}):
            continue
        if is_weight:
            added = module.get_delta_weight(adapter)
            if isinstance(module, lora.Embedding):  # Embedding.merge: `+= delta.to(orig_dtype)`
                added = added.to(param.dtype)
        elif getattr(module, "lora_bias", {}).get(adapter, False):
            added = module.lora_B[adapter].bias * module.scaling[adapter]
        else:
            continue
        if value is None:
            value = param.data.clone()
        value += added  # in place, as PEFT's merge
    return value


def merged_named_params(model: nn.Module, vllm_name: Callable[[str], str]) -> Iterator[tuple[str, torch.Tensor]]:
    """(name vLLM expects, tensor) for every base-model parameter of the PEFT `model`, LoRA layers merged, in
    `model.named_parameters()` order and under the names TRL's PEFT branch gives them; one merged tensor exists at a
    time (an 8B model's merged copy would not fit beside it). Adapter parameters themselves are skipped."""
    owners = {}
    for module in lora_layers(model):
        base = module.get_base_layer()
        owners[id(base.weight)] = module
        if getattr(base, "bias", None) is not None and any(getattr(module, "lora_bias", {}).values()):
            owners[id(base.bias)] = module
    prefix = model.prefix  # "lora_": PEFT's adapter parameters, absent from vLLM
    for name, param in model.named_parameters():
        name = name.removeprefix("base_model.model.").replace(".base_layer", "")
        if prefix in name or "original_module" in name:
            continue
        owner = owners.get(id(param))
        with torch.no_grad():  # not across the yield: a consumer that stops early leaves grad mode as it was
            value = merged_value(owner, param) if owner is not None else None
        yield vllm_name(name), param.data if value is None else value
