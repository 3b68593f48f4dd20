"""What a training run did, in a few lines: `summarise` (also `output_dir/run_summary.json`), and the lines
`ArcGRPOTrainer.train()` prints when it ends: the steps and rewards (`format_outcome`), the step-time budget
(`format_step_budget`) and what the figures mean (`format_reading`: no learning signal, the reward mode's floor,
where the episodes are).
"""

from __future__ import annotations

import os
import time

def summarise(trainer, started: float) -> dict:
    """A short run summary from the trainer's log history (also written to output_dir/run_summary.json)."""
    from transformers.trainer_utils import get_last_checkpoint

    from arc_trl.trainer.step_timing import BUCKETS

    history = [h for h in trainer.state.log_history if "reward" in h]

    def mean_of(key):
        values = [h[key] for h in history if h.get(key) is not None]
        return round(sum(values) / len(values), 4) if values else None

    def ratio_of_sums(numerator, denominator):  # run throughput (a mean of per-step ratios overweights fast steps)
        rows = [h for h in history if h.get(numerator) is not None and h.get(denominator)]
        total = sum(h[denominator] for h in rows)
        return round(sum(h[numerator] for h in rows) / total, 1) if total else None

    def window_mean(key, last):  # a few steps averaged at each end: one step's reward is noisy
        values = [h[key] for h in history if h.get(key) is not None]
        part = values[-window:] if last else values[:window]
        return round(sum(part) / len(part), 4) if part else None

    window = max(1, min(4, len(history) // 4))
    rollouts = os.path.join(trainer.args.output_dir, "rollouts")
    summary = {
        "global_step": trainer.state.global_step,
        "seconds": round(time.time() - started, 1),
        "output_dir": trainer.args.output_dir,
        "first_reward": history[0]["reward"] if history else None,
        "last_reward": history[-1]["reward"] if history else None,
        "mean_reward": sum(h["reward"] for h in history) / len(history) if history else None,
        "window_steps": window,
        "reward_first_steps": window_mean("reward", last=False),
        "reward_last_steps": window_mean("reward", last=True),
        "valid_first_steps": window_mean("rewards/valid_outputs/mean", last=False),
        "valid_last_steps": window_mean("rewards/valid_outputs/mean", last=True),
        "code_found_rate": mean_of("episode/code_found_rate"),
        "submit_rate": mean_of("episode/submit_rate"),
        "sandbox_error_rate": mean_of("sandbox/error_rate"),
        "truncated_rate": mean_of("episode/truncated_rate"),
        "no_signal_steps": no_signal_steps(history),
        "per_step_rewards": [{k: h.get(k) for k in ("step", "reward", "reward_std", "frac_reward_zero_std")}
                             for h in history],
        "turns_per_episode": mean_of("episode/turns"),
        "step_time_s": {bucket: mean_of(f"time/{bucket}") for bucket in ("step", *BUCKETS)},
        "generated_tokens_per_s": ratio_of_sums("tokens/generated", "time/generate"),
        "trained_tokens_per_s": ratio_of_sums("tokens/trained", "time/train"),
        "mfu": mean_of("mfu"),
        "peak_memory_gib": {  # the run's largest per-step figures (GPU only; docs/metrics.md)
            key: max((h[f"memory/{key}_gib"] for h in history if f"memory/{key}_gib" in h), default=None)
            for key in ("peak_allocated", "peak_reserved", "device_peak")
        },
        "checkpoint": get_last_checkpoint(trainer.args.output_dir) if os.path.isdir(trainer.args.output_dir) else None,
        "rollouts": rollouts if os.path.isdir(rollouts) else None,
        "collapse_rollbacks": getattr(trainer, "collapse_rollbacks", 0),
        # max_train_seconds: the step after which the budget ended training (None: it did not, or no budget)
        "time_budget_stop_step": getattr(getattr(trainer, "time_budget", None), "stopped_at_step", None),
        # async_rollouts: 1: background rollouts dropped in the run (stale, other rows, failed, discarded), in all
        "async_dropped_rollouts": getattr(getattr(trainer, "async_rollouts", None), "dropped", None),
        "last_log": history[-1] if history else None,
        "step_end_unix": [round(t, 3) for t in getattr(getattr(trainer, "step_budget", None), "step_ends", [])],
        "per_step": [  # each logged step's time budget, memory and sampler/trainer gap (layouts compare these)
            {k: v for k, v in h.items() if k == "step" or k.startswith(PER_STEP_PREFIXES)} for h in history
        ],
    }
    return summary


# `sampling/` whole: the gap, the importance-sampling ratio and the shares it masked or clipped (the FP8 figures read
# `sampling/masked_frac` per step; the gap alone was kept before, so those figures would have read nothing)
PER_STEP_PREFIXES = ("time/", "memory/", "sampling/", "async/")


def format_outcome(summary: dict) -> str:
    """One line: steps, reward and valid submissions at the start and the end of the run, episode statistics."""
    w = summary["window_steps"]
    where = "first / last step" if w == 1 else f"mean of the first / last {w} steps"
    line = (f"done: {summary['global_step']} steps in {summary['seconds']} s; reward {summary['reward_first_steps']} "
            f"-> {summary['reward_last_steps']} ({where})")
    if summary["valid_first_steps"] is not None:
        line += f", valid submissions {summary['valid_first_steps']:.0%} -> {summary['valid_last_steps']:.0%}"
    return (f"{line}; episodes: {summary['turns_per_episode']} turns, code in {summary['code_found_rate']}, "
            f"SUBMIT in {summary['submit_rate']}, sandbox errors {summary['sandbox_error_rate']} of runs")


def format_step_budget(summary: dict) -> str:
    """One line: the mean step time and its parts, tokens/s and MFU (n/a without a known peak, e.g. on CPU)."""
    from arc_trl.trainer.step_timing import BUCKETS

    t = summary["step_time_s"]
    if t.get("step") is None:
        return "step time: not measured"
    parts = " + ".join(f"{bucket} {t[bucket]:.2f}" for bucket in BUCKETS if t.get(bucket) is not None)
    mfu = "n/a (no peak FLOP/s known for this device; set peak_tflops)" if summary["mfu"] is None else (
        f"{100 * summary['mfu']:.2f}%")
    line = (f"mean step {t['step']:.2f} s = {parts}; {summary['generated_tokens_per_s'] or 0:.0f} tokens "
            f"generated/s, {summary['trained_tokens_per_s'] or 0:.0f} tokens trained/s; MFU {mfu}")
    memory = summary.get("peak_memory_gib") or {}
    if memory.get("device_peak") is not None:
        line += (f"; peak GPU memory {memory['device_peak']:.1f} GiB on the device, "
                 f"torch {memory['peak_allocated']:.1f} "
                 f"GiB allocated / {memory['peak_reserved']:.1f} GiB reserved")
    return line


def no_signal_steps(history: list[dict]) -> int:
    """The logged steps, counted back from the last, in which every GRPO group's rewards were equal (TRL's
    `frac_reward_zero_std` = 1): no reward difference to learn from."""
    count = 0
    for h in reversed(history):
        if h.get("frac_reward_zero_std") is None or h["frac_reward_zero_std"] < 1.0:
            break
        count += 1
    return count


def format_reading(summary: dict, reward_mode: str | None = None) -> str | None:
    """What the figures mean when a newcomer would ask: a run without learning signal, or one whose reward never left
    its mode's floor (None when neither applies)."""
    from arc_trl.rewards.modes import lowest_reward

    history = summary.get("per_step_rewards") or []
    flat = summary.get("no_signal_steps") or 0
    notes = []
    if reward_mode is not None and summary.get("reward_last_steps") is not None and summary.get("mean_reward") \
            is not None and summary["mean_reward"] <= lowest_reward(reward_mode):
        floor = ("no code parsed in any episode" if reward_mode == "barc" else "no test grid right")
        notes.append(f"the reward stayed at {reward_mode}'s floor {lowest_reward(reward_mode):g} ({floor}): expected "
                     "for an untrained or tiny model; warm-start it (arc-trl sft) or use easier tasks (synthetic:)")
    if flat and flat == len(history):
        notes.append(f"no learning signal in any of the {flat} steps: every group's episodes got the same reward "
                     "(reward std 0), so the policy gradient was 0")
    elif flat:
        notes.append(f"no learning signal in the last {flat} steps (every group's rewards equal)")
    truncated = summary.get("truncated_rate")
    if truncated is not None and truncated >= 0.99:
        notes.append("every episode was cut by a token limit (raise max_tokens_per_turn / max_completion_length)")
    return "; ".join(notes) if notes else None


def print_train_summary(trainer, started: float) -> dict:
    """Print what `trainer.train()` did (outcome, step budget, reading) and return the summary (main process)."""
    summary = summarise(trainer, started)
    print(f"[arc-trl] {format_outcome(summary)}")
    print(f"[arc-trl] {format_step_budget(summary)}")
    reading = format_reading(summary, getattr(getattr(trainer, "arc_config", None), "reward_mode", None))
    if reading:
        print(f"[arc-trl] reading: {reading}")
    where = [f"checkpoints in {summary['output_dir']}"]
    if summary["rollouts"]:
        where.append(f"episodes: arc-trl view {summary['output_dir']}")
    print(f"[arc-trl] {'; '.join(where)}")
    return summary
