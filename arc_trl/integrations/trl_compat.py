"""What differs between the two TRL releases we support: 1.16 (default install) and 1.15 (the `unsloth` extra).

A version-compat patch, part of the seam to TRL's internals (`trl_internals` names every private member arc_trl
uses; this module is the one place that replaces one of TRL's private module-level functions).

Our hooks (`rollout_func`, `_generate_and_score_completions`, `_calculate_rewards`, `compute_loss`, env/tool masks)
are the same in both. One difference matters: TRL 1.15 scores per-token log-probs through its fused LM head
(`add_fused_lm_head`, used by `GRPOTrainer._get_per_token_logps_and_entropies` and by our teachers) with a
Triton-only kernel (`trl.kernels.ChunkedLogProbFunction`), which fails on CPU ("0 active drivers"); TRL 1.16 falls
back to torch there. `use_torch_logprob_on_cpu` gives 1.15 the same fallback, swapping the function TRL's fused
forward calls (`trl.trainer.utils._ChunkedLogProbFunction`) for the plain torch computation below, only where
Triton cannot run. On GPUs, and with TRL 1.16, it changes nothing.
"""

from __future__ import annotations

import torch
from packaging.version import Version


class TorchChunkedLogProb:
    """Same inputs and outputs as TRL's `ChunkedLogProbFunction.apply`, computed with torch autograd."""

    @staticmethod
    def apply(hidden, weight, bias, targets, temperature, chunk_size, final_logit_softcapping=None, logit_scale=1.0,
              outputs=("entropy", "log_sum_sq_probs", "mean_logits", "is_top1")):
        device = hidden.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
        bias = None if bias is None else bias.to(dtype)
        logits = torch.nn.functional.linear(hidden.to(dtype), weight.to(dtype), bias)
        z = logits.float() * logit_scale
        if final_logit_softcapping is not None:
            z = final_logit_softcapping * torch.tanh(z / final_logit_softcapping)
        z = z / temperature
        log_z = torch.logsumexp(z, dim=-1)
        logprobs = z.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_z
        logp = z - log_z.unsqueeze(-1)
        entropy = -(logp.exp() * logp).sum(-1) if "entropy" in outputs else None
        with torch.no_grad():
            log_sum_sq = torch.logsumexp(2 * logp, dim=-1) if "log_sum_sq_probs" in outputs else None
            mean_logits = z.mean(-1) if "mean_logits" in outputs else None
            is_top1 = z.argmax(-1) == targets if "is_top1" in outputs else None  # first maximum, as TRL's kernel
        return logprobs, entropy, log_sum_sq, mean_logits, is_top1


def triton_can_run() -> bool:
    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def use_torch_logprob_on_cpu() -> bool:
    """With TRL < 1.16 and no GPU, route TRL's fused LM head through `TorchChunkedLogProb`. Returns whether it did."""
    import trl
    import trl.trainer.utils as trl_utils

    if Version(trl.__version__) >= Version("1.16") or triton_can_run():
        return False
    trl_utils._ChunkedLogProbFunction = TorchChunkedLogProb
    return True
