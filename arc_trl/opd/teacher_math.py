"""On-policy distillation (OPD): the per-token teacher term, as pure tensor functions.

Default ("advantage") formulation, as in the prime-rl ARC fork::

    A_t = adv_tau * A_grpo + teacher_tau * clip(logp_teacher_t - logp_student_t)      (teacher part detached)

fed through GRPO's clipped surrogate unchanged, on model tokens only (environment tokens and padding get 0).
`teacher_tau = 0, adv_tau = 1` gives back the vanilla GRPO advantage exactly. The alternative ("reverse_kl") keeps
the GRPO advantage and adds a direct per-token KL(student || teacher) penalty through TRL's own `beta` KL term
(k3 estimator), with the teacher in place of the reference model. docs/opd.md puts both side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Shaped
from torch import Tensor


@dataclass
class TeacherStats:
    teacher_kl: float  # mean over model tokens of logp_student - logp_teacher (k1 estimate of KL(student||teacher))
    teacher_logp: float  # mean teacher log-prob over model tokens with a teacher value
    student_logp: float  # mean student log-prob over the same tokens
    missing_frac: float  # share of model tokens where the teacher gave no value (NaN / -inf)
    clipped_frac: float  # share of model tokens whose difference was clipped
    num_tokens: float  # model tokens counted (for cross-process averaging)
    num_episodes: float = 0.0  # episodes (rows) of the batch with model tokens in the loss
    missing_episodes: float = 0.0  # episodes with no teacher value on any model token (e.g. no peer): no term


def teacher_log_ratio(
    teacher_logps: Float[Tensor, "batch seq"],
    student_logps: Float[Tensor, "batch seq"],
    mask: Shaped[Tensor, "batch seq"],  # 1 on model tokens (any dtype)
    clip: float | None,
) -> tuple[Float[Tensor, "batch seq"], Bool[Tensor, "batch seq"], Bool[Tensor, "batch seq"]]:
    """(logp_T - logp_S) on model tokens, 0 elsewhere and where the teacher value is missing; plus masks.

    Returns (diff, missing, clipped) where `missing`/`clipped` are boolean (B, T) masks restricted to model tokens.
    """
    mask = mask.bool()
    finite = torch.isfinite(teacher_logps) & torch.isfinite(student_logps)
    missing = mask & ~finite
    raw = torch.where(finite, teacher_logps - student_logps, torch.zeros_like(teacher_logps))
    if clip is not None:
        clipped = mask & finite & (raw.abs() > clip)
        raw = raw.clamp(-clip, clip)
    else:
        clipped = torch.zeros_like(mask)
    diff = torch.where(mask & finite, raw, torch.zeros_like(raw))
    return diff.detach(), missing, clipped


def opd_advantages(
    advantages: Float[Tensor, " batch"],
    teacher_logps: Float[Tensor, "batch seq"],
    student_logps: Float[Tensor, "batch seq"],
    mask: Shaped[Tensor, "batch seq"],
    adv_tau: float,
    teacher_tau: float,
    clip: float | None = None,
) -> Float[Tensor, "batch seq"]:
    """Per-token advantages (B, T) = adv_tau * A (B,) broadcast + teacher_tau * clipped teacher log-ratio."""
    diff, _, _ = teacher_log_ratio(teacher_logps, student_logps, mask, clip)
    return adv_tau * advantages.unsqueeze(1) + teacher_tau * diff


def teacher_stats(
    teacher_logps: Float[Tensor, "batch seq"],
    student_logps: Float[Tensor, "batch seq"],
    mask: Shaped[Tensor, "batch seq"],
    clip: float | None,
) -> TeacherStats:
    """Local (this process) statistics of the teacher term over model tokens."""
    diff, missing, clipped = teacher_log_ratio(teacher_logps, student_logps, mask, None)
    mask = mask.bool()
    valid = mask & ~missing
    n_model = mask.sum().clamp(min=1).float()
    n_valid = valid.sum().clamp(min=1).float()
    _, _, clipped = teacher_log_ratio(teacher_logps, student_logps, mask, clip)
    return TeacherStats(
        teacher_kl=float((-diff * valid).sum() / n_valid),
        teacher_logp=float(torch.where(valid, teacher_logps, 0.0).sum() / n_valid),
        student_logp=float(torch.where(valid, student_logps, 0.0).sum() / n_valid),
        missing_frac=float(missing.sum() / n_model),
        clipped_frac=float(clipped.sum() / n_model),
        num_tokens=float(mask.sum()),
        num_episodes=float(mask.any(dim=1).sum()),  # rows with model tokens (not those masked out whole)
        missing_episodes=float((mask.any(dim=1) & ~(mask & torch.isfinite(teacher_logps)).any(dim=1)).sum()),
    )
