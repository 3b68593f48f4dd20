"""The out-of-place LoRA merge (arc_trl/integrations/lora_merge.py) gives PEFT's in-place merge's bits for every layer
type it serves, never writes the base, and refuses what it cannot reproduce."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

peft = pytest.importorskip("peft")

from arc_trl.integrations.lora_merge import merged_named_params, unsupported_lora  # noqa: E402


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(64, 32)
        self.proj = nn.Linear(32, 48, bias=True)
        self.conv = nn.Conv1d(4, 6, 3)


def policy(targets: list[str], dtype=torch.bfloat16, **lora) -> nn.Module:
    torch.manual_seed(0)
    model = peft.get_peft_model(Tiny().to(dtype), peft.LoraConfig(r=4, lora_alpha=8, target_modules=targets, **lora))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name or "lora_embedding" in name:  # trained-like (B, and Embedding's A, start at 0)
                param.normal_(0, 0.05)
    return model


def base_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}


@pytest.mark.parametrize("targets, lora", [(["embed", "proj", "conv"], {}), (["proj", "conv"], {"lora_bias": True})],
                         ids=["plain", "lora_bias"])  # PEFT's Embedding takes no lora_bias
def test_merged_tensors_are_peft_in_place_merges_bits_for_linear_embedding_and_conv(targets, lora):
    model = policy(targets, **lora)
    assert unsupported_lora(model) is None
    before = base_weights(model)
    reference = copy.deepcopy(model)
    reference.merge_adapter()  # PEFT's own in-place merge (Embedding rounds the delta first, Linear does not)
    expected = {n.removeprefix("base_model.model.").replace(".base_layer", ""): p.detach()
                for n, p in reference.named_parameters() if "lora_" not in n}
    got = dict(merged_named_params(model, lambda name: name))
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[n], expected[n]) for n in got), [n for n in got if not torch.equal(got[n], expected[n])]
    as_named = {n.removeprefix("base_model.model.").replace(".base_layer", ""): t for n, t in before.items()}
    moved = [n for n in got if not torch.equal(got[n], as_named[n])]
    assert len(moved) == len(targets) * (1 + bool(lora))  # each target's weight moved, and its bias with lora_bias
    assert all(torch.equal(before[n], p) for n, p in base_weights(model).items())  # the base is never written


def test_grad_mode_is_left_as_it_was_when_the_consumer_stops_early():
    model = policy(["proj"])
    walk = merged_named_params(model, lambda name: name)
    next(walk)
    assert torch.is_grad_enabled()  # between items, as outside
    walk.close()


def test_what_the_merge_cannot_reproduce_is_named():
    assert "variant" in unsupported_lora(policy(["proj"], dtype=torch.float32, use_dora=True))
