"""The work on one task of a test-time run: GRPO on its leave-one-out episodes, then the attempts on its test inputs.

`AdaptingRunner` builds one `ArcGRPOTrainer` for the whole run, at the first task that runs (the run's config, LoRA
as configured: one model load, one colocated vLLM engine, one sandbox pool), and before every task resets it to the
start model with the task's leave-one-out rows as its `train_dataset` (`arc_trl.ttrl.shared_trainer`). It trains for
the task's budget (`max_steps`, and `TimeBudgetCallback` for the seconds), then plays `n_attempts` episodes on the
task's real test inputs with the adapted policy through the trainer's own generation backend and sandbox pool
(`arc_trl.eval.generate.generate_attempts`, as the in-training evaluation does). A task that cannot be left one out
(a single training pair; every leave-one-out prompt over `max_prompt_tokens`) is attempted by the start model,
unadapted, and its record says why. `close()` (or the `with` block) ends the trainer.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import time
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from arc_trl.data.task import ArcTask
from arc_trl.ttrl.leave_one_out import leave_one_out_tasks, tile_rows
from arc_trl.ttrl.task_folder import TaskFolder


@dataclass
class RunContext:
    """What every task of a run shares: the start model, its tokenizer and the parsed config."""

    model: str  # the start model (the base with `adapter` merged in, when one was given)
    tokenizer: Any
    script: Any  # ArcScriptArguments: prompt_template, max_prompt_tokens, augment, augment_copies
    arc: Any  # ArcConfig
    args: Any  # GRPOConfig: copied per task (output_dir: the task's train/ folder)
    ttrl: Any  # TtrlArguments
    peft_config: Any = None
    clock: Callable[[], float] = time.monotonic
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)  # extra ArcGRPOTrainer arguments (tests: teacher=)


class AdaptingRunner:
    """`arc_trl.ttrl.loop.TaskRunner` of a real run (the module docstring)."""

    def __init__(self, context: RunContext) -> None:
        from arc_trl.data import load_template

        self.context = context
        script, arc = context.script, context.arc
        self.template = load_template(script.prompt_template, arc.agent_mode) if script.prompt_template else None
        self.trainer = None  # built at the first task (build_trainer), reset before each (shared_trainer)
        self.start = None  # its StartWeights
        self.builds = 0

    def __enter__(self) -> AdaptingRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the run's trainer (its sandbox processes, background rollout) and free its memory."""
        if self.trainer is not None:
            self.trainer.close()
            self.trainer = self.start = None
            release_memory()

    # ------------------------------------------------------------------------------------------------ rows
    def rows(self, tasks: list[ArcTask], augment: bool) -> list[dict[str, Any]]:
        """Dataset rows of `tasks` (the training prompts' columns), those over `max_prompt_tokens` dropped."""
        from arc_trl.data import build_dataset

        script, arc = self.context.script, self.context.arc
        if not tasks:
            return []
        try:
            dataset = build_dataset(tasks, arc.agent_mode, template=self.template, tokenizer=self.context.tokenizer,
                                    max_prompt_tokens=script.max_prompt_tokens, augment=augment and script.augment,
                                    copies=script.augment_copies if augment and script.augment else 1,
                                    seed=self.context.args.seed, privileged=False)  # never a teacher_prompt column
        except ValueError as exc:  # every prompt over max_prompt_tokens; any other problem is the caller's
            if script.max_prompt_tokens is not None and "max_prompt_tokens" in str(exc):
                return []
            raise
        return [dataset[i] for i in range(len(dataset))]

    def prompts_per_step(self) -> int:
        args = self.context.args
        return max(1, args.generation_batch_size // args.num_generations)

    # ------------------------------------------------------------------------------------------------ one task
    def __call__(self, task: ArcTask, folder: TaskFolder, train_seconds: float | None) -> dict[str, Any]:
        from arc_trl.trainer.time_budget import TimeBudgetCallback
        from arc_trl.ttrl.shared_trainer import end_task

        if task.test_outputs is not None:  # the loop is handed tasks without solutions; never train beside them
            raise ValueError(f"task {task.id!r}: ttrl takes tasks without their test outputs (without_solutions())")
        record: dict[str, Any] = {"n_train_pairs": len(task.train), "n_test_inputs": len(task.test_inputs),
                                  "adapted": False, "n_attempts": 0, "attempt_seconds": 0.0}
        test_rows = self.rows([task], augment=False)
        if not test_rows:
            cap = self.context.script.max_prompt_tokens
            return {**record, "reason": f"its test prompt is longer than max_prompt_tokens {cap}: no attempts"}
        adapt = self.context.ttrl.adapt
        loo_rows = self.rows(leave_one_out_tasks(task), augment=True) if adapt else []
        if not adapt:
            record["reason"] = "adapt: false (the baseline): attempted by the start model"
        elif len(task.train) < 2:
            record["reason"] = "a single training pair: nothing to hold out, attempted by the start model"
        elif not loo_rows:
            record["reason"] = (f"every leave-one-out prompt is longer than max_prompt_tokens "
                                f"{self.context.script.max_prompt_tokens}: attempted by the start model")
        budget = TimeBudgetCallback(train_seconds, clock=self.context.clock) if loo_rows and train_seconds else None
        trainer = self.trainer_for(folder, tile_rows(loo_rows, self.prompts_per_step()) or test_rows,
                                   [budget] if budget else [])
        try:
            if loo_rows:
                record.update(self.train(trainer, len(loo_rows), train_seconds, budget))
            record.update(self.attempt(trainer, task, test_rows[0]["prompt"], folder))
            if loo_rows and self.context.ttrl.keep_adapters:
                trainer.save_model(str(folder.adapter_dir))
                record["adapter"] = str(folder.adapter_dir)
        finally:
            end_task(trainer, [budget] if budget else [])
        return record

    def trainer_for(self, folder: TaskFolder, rows: list[dict[str, Any]], task_callbacks: list[Any]):
        """The run's trainer (built at the first call), reset to the start model for this task (shared_trainer)."""
        from datasets import Dataset

        from arc_trl.ttrl.shared_trainer import StartWeights, reset_for_task, restores_everything

        dataset = Dataset.from_list(rows)
        if self.trainer is None:
            self.trainer = self.build_trainer(folder.train_dir, dataset)
            self.builds += 1
            self.start = StartWeights(self.trainer.model, everything=restores_everything(self.trainer))
        reset_for_task(self.trainer, self.start, dataset, str(folder.train_dir), self.trainer.args.seed,
                       task_callbacks)
        return self.trainer

    def build_trainer(self, output_dir: Path, train_dataset):
        """The run's `ArcGRPOTrainer` (the first task's rows and folder; `reset_for_task` sets every task's)."""
        from arc_trl.trainer import ArcGRPOTrainer

        context = self.context
        args = copy.deepcopy(context.args)
        args.output_dir = str(output_dir)
        return ArcGRPOTrainer(model=context.model, args=args, arc_config=copy.deepcopy(context.arc),
                              train_dataset=train_dataset, processing_class=context.tokenizer,
                              peft_config=copy.deepcopy(context.peft_config), **context.trainer_kwargs)

    def train(self, trainer, n_prompts: int, train_seconds: float | None, budget=None) -> dict[str, Any]:
        started = self.context.clock()
        trainer.train()
        stopped = budget is not None and budget.stopped_at_step is not None
        rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
        return {"adapted": True, "loo_prompts": n_prompts, "steps": trainer.state.global_step,
                "train_seconds": round(self.context.clock() - started, 3), "train_seconds_cap": train_seconds,
                "stopped_by": "task time budget" if stopped else "max_steps",
                "reward_first": rewards[0] if rewards else None, "reward_last": rewards[-1] if rewards else None}

    def attempt(self, trainer, task: ArcTask, prompt: list[dict], folder: TaskFolder) -> dict[str, Any]:
        """`n_attempts` episodes on the task's test inputs with the trainer's policy, into `folder.completions`."""
        from arc_trl.eval.attempts_file import plan_jobs
        from arc_trl.eval.generate import generate_attempts
        from arc_trl.integrations.trl_internals import engine_awake
        from arc_trl.rollout import TrainerGenerator
        from arc_trl.rollout.generators import generation_overrides

        ttrl, args = self.context.ttrl, trainer.args
        jobs = plan_jobs([task], ttrl.n_attempts, set(), False, args.seed)
        stats: dict[str, Any] = {}
        was_training = trainer.model.training
        trainer.model.eval()
        started = self.context.clock()
        try:
            with open(folder.completions, "a", encoding="utf-8") as out, \
                    generation_overrides(trainer, temperature=ttrl.attempt_temperature), engine_awake(trainer):

                def write(attempt: dict[str, Any]) -> None:
                    out.write(json.dumps(attempt) + "\n")
                    out.flush()

                generate_attempts(jobs, [prompt] * len(jobs), TrainerGenerator(trainer), trainer.processing_class,
                                  trainer.sandbox_pool, trainer.rollout.settings, trainer.chat_template_kwargs,
                                  args.per_device_train_batch_size * args.steps_per_generation, write, stats,
                                  progress=False)
        finally:
            trainer.model.train(was_training)
        return {"n_attempts": stats.get("attempts", 0), "attempt_seconds": round(self.context.clock() - started, 3),
                "attempt_model_tokens": stats.get("model_tokens", 0)}


def release_memory() -> None:
    """Free what the run's trainer held (its model, optimizer, engine) once it is closed."""
    gc.collect()
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
