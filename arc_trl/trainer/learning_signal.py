"""A warning when a run has had no learning signal for `no_signal_warn_steps` logged steps in a row: every GRPO
group's episodes got the same reward (TRL's `frac_reward_zero_std` = 1), so every advantage, and with no teacher
term the whole policy gradient, is 0 (a run whose episodes are all truncated, or all at the reward's floor, looks
healthy otherwise). Said once per streak on stderr and logged as `train/no_signal_steps`."""

from __future__ import annotations

import sys

from transformers import TrainerCallback

KEY = "frac_reward_zero_std"


class NoLearningSignalCallback(TrainerCallback):
    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.streak = 0
        self.warned = False
        self.events: list[dict] = []  # {step, steps}: each warning, for tests and W&B

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or KEY not in logs or logs[KEY] is None:
            return
        if logs[KEY] < 1.0:
            self.streak, self.warned = 0, False
            return
        self.streak += 1
        logs["no_signal_steps"] = float(self.streak)
        if self.streak >= self.steps and not self.warned and state.is_world_process_zero:
            self.warned = True
            self.events.append({"step": state.global_step, "steps": self.streak})
            print(f"[arc-trl] warning: no learning signal for {self.streak} steps (to step {state.global_step}): "
                  "every group's episodes got the same reward (reward std 0), so the policy gradient is 0. Are all "
                  "episodes truncated (episode/truncated_rate) or at the reward's floor? Warm-start the model "
                  "(arc-trl sft), give it more tokens, easier tasks, or more generations per group", file=sys.stderr)
