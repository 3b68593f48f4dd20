"""The metrics of a generation batch, summed over processes: episodes, sampling mismatch, teacher, step tokens.

Each family sums named local values over all processes with `gather_sums` and divides the totals, so every
process logs the same, batch-wide, values (a ratio with a zero denominator is 0). The trainer logs the returned
dicts into TRL's metrics (`arc_trl.integrations.trl_internals.log_metrics`). Collective: every process calls the
same functions in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from arc_trl.collapse.signals import episode_repetition
from arc_trl.opd.teacher_math import TeacherStats
from arc_trl.trainer.loss_mask import loss_mask
from arc_trl.trainer.sampling_mismatch import importance_sampling_hits, mismatch_counts


def gather_sums(accelerator, values: dict[str, float]) -> dict[str, float]:
    """Each named value summed over processes (float64). Every process passes the same names in the same order."""
    local = torch.tensor([float(v) for v in values.values()], dtype=torch.float64, device=accelerator.device)
    totals = accelerator.gather(local.unsqueeze(0)).sum(dim=0).tolist()
    return dict(zip(values, totals))


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


# ---------------------------------------------------------------------------------------------------- episodes
def episode_metrics(accelerator, episodes) -> dict[str, float]:
    """`episode/*` and `sandbox/*`: means per episode, rates per code run or per token. Empty without episodes."""
    if not episodes:
        return {}
    repetition = [episode_repetition(ep) for ep in episodes]  # collapse signals, model tokens only
    all_tokens = sum(len(ep.completion_ids) for ep in episodes)
    t = gather_sums(accelerator, {
        "episodes": len(episodes),
        "turns": sum(ep.outcome.num_turns for ep in episodes),
        "submitted": sum(ep.outcome.submitted for ep in episodes),
        "truncated": sum(ep.truncated for ep in episodes),  # cut turns and budget endings
        "code_found": sum(ep.outcome.code_found for ep in episodes),
        "code_runs": sum(ep.outcome.num_code_runs for ep in episodes),
        "errors": sum(ep.outcome.num_errors for ep in episodes),
        "timeouts": sum(ep.outcome.num_timeouts for ep in episodes),
        "env_tokens": all_tokens - sum(ep.num_model_tokens for ep in episodes),
        "tokens": all_tokens,
        "model_tokens": sum(r.tokens for r in repetition),
        "repeated_tokens": sum(r.repeated for r in repetition),
        "longest_repeat_runs": sum(r.longest_run for r in repetition),
        "code_parsed": sum(ep.outcome.code_parsed for ep in episodes),
        "valid_predictions": sum(valid_prediction(ep.outcome) for ep in episodes),
    })
    n = t["episodes"]
    return {
        "episode/turns": t["turns"] / n,
        "episode/submit_rate": t["submitted"] / n,
        "episode/truncated_rate": t["truncated"] / n,
        "episode/code_found_rate": t["code_found"] / n,
        "sandbox/error_rate": ratio(t["errors"], t["code_runs"]),
        "sandbox/timeout_rate": ratio(t["timeouts"], t["code_runs"]),
        "episode/env_token_frac": ratio(t["env_tokens"], t["tokens"]),
        "episode/model_tokens": t["model_tokens"] / n,
        "episode/repeat_frac": ratio(t["repeated_tokens"], t["model_tokens"]),
        "episode/repeat_run": t["longest_repeat_runs"] / n,
        "episode/code_parsed_rate": t["code_parsed"] / n,
        "episode/valid_prediction_rate": t["valid_predictions"] / n,
    }


def valid_prediction(outcome) -> bool:
    """A grid for every test input (the research log's "valid outputs")."""
    predictions = outcome.test_predictions
    return bool(predictions) and all(p is not None for p in predictions)


# ---------------------------------------------------------------------------------------------------- sampling
def sampling_mismatch_metrics(accelerator, output: dict[str, Any], mode: str, clip_min: float | None,
                              clip_max: float | None) -> dict[str, float]:
    """`sampling/*`: the share of model tokens / episodes that TRL's vLLM importance-sampling correction (`mode`)
    masks or clips. Empty when the batch has no trainer or sampler log-probs."""
    trainer_logps, sampler_logps = output.get("old_per_token_logps"), output.get("sampling_per_token_logps")
    if trainer_logps is None or sampler_logps is None:
        return {}
    model_mask = loss_mask(output)
    masked, clipped = importance_sampling_hits(trainer_logps, sampler_logps, model_mask, mode, clip_min, clip_max)
    c = mismatch_counts(masked, clipped, model_mask)
    t = gather_sums(accelerator, {
        "model_tokens": c.model_tokens, "masked_tokens": c.masked_tokens, "clipped_tokens": c.clipped_tokens,
        "episodes": c.episodes, "masked_episodes": c.masked_episodes, "clipped_episodes": c.clipped_episodes,
    })
    return {
        "sampling/masked_frac": ratio(t["masked_tokens"], t["model_tokens"]),
        "sampling/clipped_frac": ratio(t["clipped_tokens"], t["model_tokens"]),
        "sampling/masked_episode_frac": ratio(t["masked_episodes"], t["episodes"]),
        "sampling/clipped_episode_frac": ratio(t["clipped_episodes"], t["episodes"]),
    }


def trl_sampling_metrics(accelerator, trainer_logps, sampler_logps, model_mask, is_ratio,
                         sequence_level: bool) -> dict[str, float]:
    """The `sampling/*` metrics TRL 1.16 logs with its vLLM importance-sampling correction
    (`_generate_and_score_completions`), op for op: the |logp_trainer - logp_vLLM| mean/max over model tokens with a
    sampler value, the ratio's min/mean/max (over sequences in `sequence_*` modes, over model tokens otherwise);
    per-process values combined as TRL combines them. For `defer_old_logps`, which computes them at loss time."""
    device = trainer_logps.device
    zero = torch.tensor(0.0, device=device)
    mask = model_mask.bool()
    delta = torch.abs(trainer_logps - sampler_logps)
    delta = delta[mask & ~torch.isnan(delta)]
    flat = is_ratio.flatten() if sequence_level else is_ratio[mask]

    def stat(op, values):
        return op(values) if values.numel() > 0 else zero

    mean_delta, max_delta = accelerator.gather(stat(torch.mean, delta)), accelerator.gather(stat(torch.max, delta))
    ratio_min = accelerator.gather(stat(torch.min, flat))
    ratio_mean = accelerator.gather(stat(torch.mean, flat))
    ratio_max = accelerator.gather(stat(torch.max, flat))
    return {
        "sampling/sampling_logp_difference/mean": mean_delta.mean().item(),
        "sampling/sampling_logp_difference/max": max_delta.max().item(),
        "sampling/importance_sampling_ratio/min": _nan_reduce(ratio_min, torch.min),
        "sampling/importance_sampling_ratio/mean": ratio_mean.nanmean().item(),
        "sampling/importance_sampling_ratio/max": _nan_reduce(ratio_max, torch.max),
    }


def _nan_reduce(values, op) -> float:
    """TRL's nanmin / nanmax: the min / max over the non-NaN values (NaN when all are NaN)."""
    values = values[~torch.isnan(values)]
    return op(values).item() if values.numel() else float("nan")


# ---------------------------------------------------------------------------------------------------- teacher
def teacher_metrics(accelerator, stats: TeacherStats) -> dict[str, float]:
    """`teacher_kl`, `teacher_logp`, ...: this process's `TeacherStats`, averaged over all model tokens; and
    `teacher_missing_episode_frac`, the share of the batch's episodes with no teacher value at all (no term)."""
    n = stats.num_tokens
    t = gather_sums(accelerator, {
        "teacher_kl": stats.teacher_kl * n,
        "teacher_logp": stats.teacher_logp * n,
        "student_logp": stats.student_logp * n,
        "teacher_missing_frac": stats.missing_frac * n,
        "teacher_clipped_frac": stats.clipped_frac * n,
        "tokens": n,
        "missing_episodes": stats.missing_episodes,
        "episodes": stats.num_episodes,
    })
    tokens = max(t.pop("tokens"), 1.0)
    missing_episodes, episodes = t.pop("missing_episodes"), t.pop("episodes")
    return {key: value / tokens for key, value in t.items()} | {
        "teacher_missing_episode_frac": ratio(missing_episodes, episodes)}


# ---------------------------------------------------------------------------------------------------- step tokens
@dataclass
class StepTokens:
    """The tokens of one optimizer step on this process (for `tokens/*`, throughput and MFU: `step_timing.py`)."""

    generated: float = 0.0  # model tokens sampled by the rollout
    trained: float = 0.0  # tokens the forward + backward passes attend to
    no_grad: float = 0.0  # tokens of the extra no-grad forwards (old-policy and reference log-probs)

    def add_batch(self, output: dict[str, Any], episodes, beta: float) -> None:
        """A generation batch: its sampled tokens, and its no-grad forwards (TRL's old log-probs, the KL reference)."""
        batch_tokens = float(output["prompt_mask"].sum() + output["completion_mask"].sum())
        no_grad_forwards = int(output.get("old_per_token_logps") is not None) + int(beta != 0.0)
        self.generated += float(sum(ep.num_model_tokens for ep in episodes))
        self.no_grad += no_grad_forwards * batch_tokens

    def add_trained(self, inputs: dict[str, Any]) -> None:
        """A micro-batch's forward + backward."""
        self.trained += float(inputs["prompt_mask"].sum() + inputs["completion_mask"].sum())

    def summed(self, accelerator) -> dict[str, float]:
        """`{generated, trained, no_grad}` summed over processes."""
        return gather_sums(accelerator, {"generated": self.generated, "trained": self.trained,
                                         "no_grad": self.no_grad})
