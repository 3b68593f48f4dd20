"""In-training ARC evaluation: the policy being trained plays held-out tasks every N optimizer steps.

`ArcEvalCallback` runs `n_predictions` attempts on each of the first `max_tasks` rows of the evaluation dataset
(built like the training one: columns `prompt`, `task_id`, `task_json`) with the trainer's own generation backend
(`arc_trl.rollout.TrainerGenerator`: colocated vLLM, the vLLM server or transformers, weights synced as in training)
and the trainer's sandbox pool, then logs through the trainer's logger (W&B, trackio, none...):

- `eval_arc/pass@k` for k = 1, 2, 4, ... and n_predictions (unbiased estimator, `arc_trl.eval.passk`), over the
  tasks whose test outputs are known;
- `eval_arc/reward` (mean reward of the run's `reward_mode`), `eval_arc/valid_outputs`, `eval_arc/submit_rate`,
  `eval_arc/code_found_rate`, `eval_arc/truncated_rate`, `eval_arc/turns`, `eval_arc/model_tokens` (per attempt),
  `eval_arc/seconds`.

Generation is collective in distributed runs, so every process runs the evaluation on its share of the attempts;
results are gathered and every process logs the same values (the reporting integrations write from the main process
only). The model is put in eval mode for the duration and its previous mode restored. With `save_completions`, the
main process writes the attempts to `output_dir/eval_arc/step_NNNNNN.jsonl` in the `arc-trl evaluate score` format.
"""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import contextmanager
from typing import Any

from transformers import Trainer, TrainerCallback

from arc_trl.config import defaults
from arc_trl.data.task import ArcTask

EVAL_PREFIX = "eval_arc/"
EVAL_FOLDER = "eval_arc"


class ArcEvalCallback(TrainerCallback):
    def __init__(
        self,
        trainer,
        eval_dataset,
        every_steps: int,
        n_predictions: int = defaults.EVAL_N_PREDICTIONS,
        max_tasks: int | None = defaults.EVAL_MAX_TASKS,
        temperature: float | None = defaults.TEMPERATURE,
        at_start: bool = True,
        save_completions: bool = True,
    ) -> None:
        from arc_trl.rollout import task_from_row

        if every_steps < 0:
            raise ValueError(f"eval_every_steps must be >= 0 (0: off), got {every_steps}")
        if n_predictions < 1:
            raise ValueError(f"eval_n_predictions must be >= 1, got {n_predictions}")
        if max_tasks is not None and max_tasks < 1:
            raise ValueError(f"eval_max_tasks must be >= 1 or None (all), got {max_tasks}")
        if temperature is not None and temperature <= 0:
            raise ValueError(f"eval_temperature must be > 0, got {temperature}")
        if eval_dataset is None or len(eval_dataset) == 0:
            raise ValueError("in-training evaluation needs a non-empty eval_dataset")
        rows = [eval_dataset[i] for i in range(min(len(eval_dataset), max_tasks or len(eval_dataset)))]
        self.trainer = trainer
        self.tasks: list[ArcTask] = [task_from_row(row) for row in rows]
        self.prompts: list[list[dict]] = [row["prompt"] for row in rows]
        self.every_steps = every_steps
        self.n_predictions = n_predictions
        self.temperature = temperature
        self.at_start = at_start
        self.save_completions = save_completions
        self.last_metrics: dict[str, float] = {}

    @classmethod
    def from_config(cls, trainer, eval_dataset) -> ArcEvalCallback:
        """The callback configured by the trainer's `ArcConfig` (`eval_*` keys)."""
        arc = trainer.arc_config
        return cls(trainer, eval_dataset, arc.eval_every_steps, arc.eval_n_predictions, arc.eval_max_tasks,
                   arc.eval_temperature, arc.eval_at_start, arc.eval_save_completions)

    # ------------------------------------------------------------------------------------------------ events
    def on_train_begin(self, args, state, control, **kwargs):
        if self.at_start and state.global_step == 0:
            self.evaluate()

    def on_step_end(self, args, state, control, **kwargs):
        if self.every_steps > 0 and state.global_step % self.every_steps == 0:
            self.evaluate()

    # ------------------------------------------------------------------------------------------------ evaluation
    def evaluate(self) -> dict[str, float]:
        """Play the evaluation attempts, log the metrics (on every process) and return them."""
        from accelerate.utils import gather_object

        trainer = self.trainer
        if getattr(trainer, "async_rollouts", None) is not None:  # no weight push or temperature change under a
            trainer.async_rollouts.settle()  # background rollout in flight (arc_trl/trainer/async_rollout.py) on
            trainer.accelerator.wait_for_everyone()  # any process: the evaluation's first push may come unannounced
        start = time.perf_counter()
        pairs = [(t, a) for t in range(len(self.tasks)) for a in range(self.n_predictions)]
        chunk = trainer.args.per_device_train_batch_size * trainer.args.steps_per_generation
        rounds = process_rounds(pairs, trainer.accelerator.num_processes, trainer.accelerator.process_index, chunk)
        was_training = trainer.model.training
        trainer.model.eval()
        results: list[dict[str, Any]] = []
        from tqdm import tqdm

        quiet = trainer.args.disable_tqdm or not trainer.accelerator.is_main_process
        try:
            with self._sampling_temperature(), tqdm(total=len(pairs), desc=f"eval_arc step {trainer.state.global_step}",
                                                   unit="attempt", disable=quiet) as bar:
                for part, dummy in rounds:
                    results += self._play(part, dummy)
                    bar.update(0 if dummy else len(part) * trainer.accelerator.num_processes)
        finally:
            trainer.model.train(was_training)
        results = gather_object(results)
        metrics = summarise(results, self.tasks, self.n_predictions)
        metrics[EVAL_PREFIX + "seconds"] = round(time.perf_counter() - start, 3)
        if self.save_completions and trainer.accelerator.is_main_process:
            self._save(results)
        self.last_metrics = metrics
        if trainer.accelerator.is_main_process:  # per-task outcomes as a W&B table (a no-op without a W&B run)
            from arc_trl.view.wandb_tables import log_eval_tasks

            log_eval_tasks(self.tasks, results, trainer.state.global_step)
            pass1 = metrics.get(EVAL_PREFIX + "pass@1")
            print(f"[arc-trl] eval_arc at step {trainer.state.global_step}: pass@1 "
                  f"{'-' if pass1 is None else f'{100 * pass1:.2f}%'} over {len(self.tasks)} tasks x "
                  f"{self.n_predictions} attempts in {metrics[EVAL_PREFIX + 'seconds']:.1f} s")
        should_log = trainer.control.should_log  # logging resets it; the step's own training log must still happen
        Trainer.log(trainer, dict(metrics))  # not GRPOTrainer.log: that would also flush the pending train metrics
        trainer.control.should_log = should_log
        return metrics

    def _play(self, part: list[tuple[int, int]], dummy: bool) -> list[dict[str, Any]]:
        """Run one batch of attempts; per attempt a small summary (and its record for the dump)."""
        from arc_trl.eval.attempts_file import completion_text
        from arc_trl.eval.error_kinds import attempt_kind
        from arc_trl.eval.score import score_attempt
        from arc_trl.rewards.modes import compute_reward
        from arc_trl.rollout import TrainerGenerator, run_episodes
        from arc_trl.integrations.trl_internals import engine_awake

        trainer = self.trainer
        tasks = [self.tasks[t] for t, _ in part]
        with engine_awake(trainer):  # a sleep-mode engine: one weight push and one sleep per batch, not per turn
            episodes = run_episodes(tasks, [self.prompts[t] for t, _ in part], TrainerGenerator(trainer),
                                    trainer.processing_class, trainer.sandbox_pool, trainer.rollout.settings,
                                    trainer.chat_template_kwargs)
        if dummy:  # this process had no attempt left; it only joined the collective generation calls
            return []
        arc = trainer.arc_config
        out = []
        for (t, attempt), task, ep in zip(part, tasks, episodes):
            row = score_attempt(task, ep.outcome)
            known = task.test_outputs is not None
            out.append({
                "task": t, "attempt": attempt, "passed": row["passed"], "valid_outputs": row["valid_outputs"],
                "pixel": sum(row["test_pixel"]) / len(row["test_pixel"]) if row["test_pixel"] else None,
                "kind": attempt_kind(row["passed"], row["valid_outputs"], ep.finish_reason, row["code_found"],
                                     ep.outcome.error_kind),
                "submitted": bool(ep.outcome.submitted), "code_found": bool(ep.outcome.code_found),
                "truncated": ep.truncated, "turns": len(ep.assistant_texts),
                "model_tokens": ep.num_model_tokens,
                "reward": compute_reward(arc.reward_mode, ep.outcome, task, arc.agent_mode) if known else None,
                "record": {"task_id": task.id, "attempt": attempt, "completion": completion_text(ep),
                           "finish_reason": ep.finish_reason, "num_turns": len(ep.assistant_texts),
                           "outcome": ep.outcome.to_dict(), "messages": ep.messages(),
                           "final_observation": ep.final_observation},
            })
        return out

    @contextmanager
    def _sampling_temperature(self):
        """Sample at `temperature` for the evaluation (the backend's settings are restored afterwards)."""
        from arc_trl.rollout.generators import generation_overrides

        with generation_overrides(self.trainer, temperature=self.temperature):
            yield

    def _save(self, results: list[dict[str, Any]]) -> None:
        folder = os.path.join(self.trainer.args.output_dir, EVAL_FOLDER)
        os.makedirs(folder, exist_ok=True)
        step = self.trainer.state.global_step
        with open(os.path.join(folder, f"step_{step:06d}.jsonl"), "w") as f:
            ordered = sorted(results, key=lambda r: (r["task"], r["attempt"]))
            f.writelines(json.dumps({**r["record"], "step": step}) + "\n" for r in ordered)


def process_rounds(pairs: list, world: int, rank: int, chunk: int) -> list[tuple[list, bool]]:
    """This process's batches of (task, attempt) pairs, as (pairs, dummy) with at most `chunk` pairs each.

    Every process gets the same number of batches, since generation calls are collective; in a round where a process
    has nothing left it plays the first pair as a dummy (`dummy=True`: its result is dropped).
    """
    local = pairs[rank::world]
    n_rounds = math.ceil(math.ceil(len(pairs) / world) / chunk)
    rounds = []
    for r in range(n_rounds):
        part = local[r * chunk : (r + 1) * chunk]
        rounds.append((part, False) if part else (pairs[:1], True))
    return rounds


def summarise(results: list[dict[str, Any]], tasks: list[ArcTask], n_predictions: int) -> dict[str, float]:
    """The logged metrics (module docstring) from the per-attempt summaries of all processes."""
    from arc_trl.eval.passk import default_ks, pass_at_k_curve

    def mean(key: str) -> float | None:
        values = [float(r[key]) for r in results if r[key] is not None]
        return sum(values) / len(values) if values else None

    counts: dict[str, list[int]] = {}
    for r in results:
        if r["passed"] is not None:
            n_c = counts.setdefault(tasks[r["task"]].id, [0, 0])
            n_c[0] += 1
            n_c[1] += int(r["passed"])
    metrics = {}
    curve = pass_at_k_curve({k: (n, c) for k, (n, c) in counts.items()}, default_ks(n_predictions))
    for k, value in curve["pass_at_k"].items():
        metrics[f"{EVAL_PREFIX}pass@{k}"] = value
    for key, name in [("reward", "reward"), ("valid_outputs", "valid_outputs"), ("submitted", "submit_rate"),
                      ("code_found", "code_found_rate"), ("truncated", "truncated_rate"), ("turns", "turns"),
                      ("model_tokens", "model_tokens")]:
        value = mean(key)
        if value is not None:  # e.g. no reward without test outputs; loggers reject NaN
            metrics[EVAL_PREFIX + name] = value
    metrics[EVAL_PREFIX + "n_tasks"] = float(len(tasks))
    return metrics
