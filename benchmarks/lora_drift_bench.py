"""How far 100 LoRA weight syncs move the frozen base: TRL's in-place merge/unmerge against arc-trl's out-of-place
merge (arc_trl/integrations/lora_merge.py), on Qwen3-8B-shaped bf16 layers with a trained-like r16 adapter (CPU, ~1 min).

    python benchmarks/lora_drift_bench.py --out results/gpu_multigpu/lora_drift.json

Both walks are the real ones: TRL's `VLLMGeneration.sync_weights` with its `_iter_named_params`, and the same with
`arc_trl.integrations.trl_internals.lossless_lora_sync` installed, pushing into an engine that only records. The layers are one
decoder layer's projections of the 8B shape (hidden 4096, intermediate 12288, 32 query / 8 key-value heads of 128),
random N(0, 0.02) in bf16; the adapter's B is N(0, 0.01) (an untrained B is zero and merges nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {"q_proj": (4096, 4096), "k_proj": (1024, 4096), "v_proj": (1024, 4096), "o_proj": (4096, 4096),
          "gate_proj": (12288, 4096), "up_proj": (12288, 4096), "down_proj": (4096, 12288)}


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        for name, (out_features, in_features) in SHAPES.items():
            setattr(self, name, nn.Linear(in_features, out_features, bias=False))


class Recorder:
    """A colocated engine that only counts what it is given."""

    def __init__(self) -> None:
        model = SimpleNamespace(load_weights=lambda weights: None)
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=model))))

    def reset_prefix_cache(self) -> None:
        pass


def policy(seed: int = 0):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    base = Layer()
    with torch.no_grad():
        for p in base.parameters():
            p.normal_(0, 0.02)
    base = base.to(torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=list(SHAPES)))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.01)
    return model


def sync(model, lossless: bool, syncs: int) -> dict:
    from accelerate import Accelerator
    from trl.distributed import DistributedBackend
    from trl.generation.vllm_generation import VLLMGeneration

    from arc_trl.integrations.trl_internals import lossless_lora_sync

    accelerator = Accelerator(cpu=True)
    vg = object.__new__(VLLMGeneration)
    vg.__dict__.update(mode="colocate", enable_sleep_mode=False, llm=Recorder(), model=model, accelerator=accelerator,
                       _dist=DistributedBackend(accelerator))
    if lossless:
        assert lossless_lora_sync(vg) is None
    before = {n: p.detach().float().clone() for n, p in model.named_parameters() if "lora_" not in n}
    for _ in range(syncs):
        vg.sync_weights()
    changed = worst = 0.0
    total = 0
    for name, p in model.named_parameters():
        if "lora_" in name:
            continue
        delta = (p.detach().float() - before[name]).abs()
        changed += float((delta > 0).sum())
        total += delta.numel()
        worst = max(worst, float(delta.max() / before[name].abs().mean()))
    return {"changed_fraction": changed / total, "max_abs_change_over_mean_abs_weight": worst}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--syncs", type=int, default=100)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = {
        "syncs": args.syncs,
        "layers": "one Qwen3-8B decoder layer's 7 projections, bf16, LoRA r16 (alpha 32) with B ~ N(0, 0.01)",
        "trl_merge_unmerge": sync(policy(), lossless=False, syncs=args.syncs),
        "arc_trl_out_of_place": sync(policy(), lossless=True, syncs=args.syncs),
        "command": "python benchmarks/lora_drift_bench.py --out results/gpu_multigpu/lora_drift.json",
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
