"""Make vLLM's CPU build accept in-place weight updates (TRL's colocated weight sync).

A version-compat patch, part of the seam to vLLM's internals (`trl_internals` names every private member arc_trl
uses; this module is the one place that replaces a vLLM function).

vLLM-CPU repacks every linear weight into a oneDNN/SGL kernel handle after loading and drops the original
`Parameter` (`dispatch_cpu_unquantized_gemm(..., remove_weight=True)`), so TRL's `sync_weights` -> `load_weights`
fails with "'Parameter' object has no attribute 'weight_loader'", and vLLM's layerwise `reload_weights` leaves the
packed handles stale (measured: logprobs diverge from the trainer after a reload). We route CPU linears through
`torch.nn.functional.linear` on the original parameters instead; weight sync is then a plain in-place copy and the
engine's logprobs match a transformers forward exactly (tests/test_vllm_cpu.py). Costs some CPU GEMM speed; GPU
builds are untouched.
"""

from __future__ import annotations

import torch

_PATCHED = False


def make_cpu_weights_reloadable() -> bool:
    """Apply the patch in this process (before the engine is built). Returns True if vLLM runs on CPU here."""
    global _PATCHED
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return False
    if not _PATCHED:
        import vllm.model_executor.layers.utils as layer_utils

        def keep_weights(layer: torch.nn.Module, remove_weight: bool) -> None:
            layer.cpu_linear = torch.nn.functional.linear

        layer_utils.dispatch_cpu_unquantized_gemm = keep_weights
        _PATCHED = True
    return True
