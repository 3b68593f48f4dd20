"""`arc-trl evaluate generate`: sample attempts with the training agent, save them resumably, then score them.

The agent is the one `ArcGRPOTrainer` trains: the same prompts (`arc_trl.data.render_messages`), the same chat
template resolution (`arc_trl.chat_template.resolve_chat_template`), the same sandbox and episode loop
(`arc_trl.rollout.run_episodes`), with a standalone vLLM engine (`VLLMGenerator`) or transformers `generate`
(`TransformersGenerator`) in place of the trainer's backend. `--privileged program|solutions` prompts with the
distillation teacher's privileged variant instead (the hint appended to the user message, as `teacher_privileged` in
training): what a privileged teacher solves when shown its hint.

Files in `--output-dir DIR`:

- `completions.jsonl`: one line per attempt, in the `arc-trl evaluate score` format plus extra fields: `task_id` (the
  original id), `attempt` (index within the task), `completion` (the assistant turns that ran, joined by blank lines:
  replaying it runs the same code blocks in order and reaches the same SUBMIT; a last turn cut by the token cap is
  left out because the episode did not run it either), `augmentation` (with `--augment`: the `Augmentation` string
  of the copy the model saw, "" for the identity), `finish_reason`, `num_turns`, `num_model_tokens`, `outcome`
  (the episode's `AttemptOutcome`) and `messages` (the whole conversation, prompt included). A line is appended and
  flushed as soon as its episode ends.
- `sampling.json`: the settings that define an attempt (`MATCHED_SETTINGS`: model, adapter, dataset, agent and
  sampling options, chat/prompt templates) and one entry per run (seed, backend, versions, throughput). A folder
  never mixes attempts made with different settings: rerunning with other values fails.
- after generation (unless `--no-score`): what `arc-trl evaluate score` writes (`metrics.json`, `per_attempt.jsonl`,
  `metrics.md`, `pass_at_k.json`, `pass_at_k.png`), scoring the first `--n-predictions` attempts of each task.

Resuming: rerunning the same command generates only the (task_id, attempt) pairs missing from `completions.jsonl`;
a torn last line left by a crash is cut off and regenerated. Raising `--n-predictions` adds attempts to a folder.

The attempts file lives in `arc_trl.eval.attempts_file`, the options and `sampling.json` in
`arc_trl.eval.generation_settings`, the tokenizer, models and generators in `arc_trl.eval.generation_backends`.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask
from arc_trl.eval.attempts_file import COMPLETIONS_FILE, Job, episode_record, plan_jobs, read_completions_file
from arc_trl.eval.generation_backends import BACKENDS, build_generator, eos_token_ids, load_tokenizer
from arc_trl.config import defaults
from arc_trl.config.choices import AGENT_MODES, ROLLOUT_SCHEDULINGS
from arc_trl.eval.generation_settings import (
    CONFIGURABLE,
    SAMPLING_FILE,
    GenerateInputError,
    check_settings,
    matched_settings,
    package_versions,
    resolve_options,
    write_json,
)


# --------------------------------------------------------------------------------------------------------------------
# generation and scoring


def generate_attempts(jobs: list[Job], prompts: list[list[dict]], generator, tokenizer, pool, settings,
                      template_kwargs: dict, batch_size: int, write: Callable[[dict[str, Any]], None],
                      stats: dict[str, Any], progress: bool = True) -> None:
    """Play every job's episode and `write` each record as soon as it ends: `batch_size` episodes in play at once
    (per-episode scheduling: a new episode starts whenever one ends; lock-step: batch after batch).

    `stats` (attempts, model_tokens, seconds, model_tokens_per_s) is kept up to date, also when this raises."""
    from tqdm import tqdm

    from arc_trl.rollout import run_episodes
    from arc_trl.rollout.per_episode import per_episode_unsupported

    stats.update(attempts=0, model_tokens=0)
    rolling = settings.scheduling == "per_episode" and per_episode_unsupported(generator) is None
    chunk = len(jobs) if rolling else batch_size  # rolling: one call, at most batch_size episodes in play
    start = time.perf_counter()
    try:
        with tqdm(total=len(jobs), desc="generating", unit="attempt", disable=not progress, file=sys.stderr) as bar:
            for first in range(0, len(jobs), max(1, chunk)):
                batch, batch_prompts = jobs[first : first + chunk], prompts[first : first + chunk]

                def on_finished(episodes, batch=batch, batch_prompts=batch_prompts):
                    for ep in episodes:
                        write(episode_record(batch[ep.index], ep, batch_prompts[ep.index]))
                        stats["attempts"] += 1
                        stats["model_tokens"] += ep.num_model_tokens
                    bar.update(len(episodes))

                run_episodes([j.task for j in batch], batch_prompts, generator, tokenizer, pool, settings,
                             template_kwargs, on_finished=on_finished, max_active=batch_size)
    finally:
        seconds = time.perf_counter() - start
        stats["seconds"] = round(seconds, 3)
        stats["model_tokens_per_s"] = round(stats["model_tokens"] / seconds, 1) if seconds > 0 else None


def score_folder(output_dir: Path, tasks: list[ArcTask], n_predictions: int, dataset: str, agent_mode: str,
                 workers: int, config, progress: bool = True, dropped: Sequence[ArcTask] = (),
                 per_task: bool = False, wandb_project: str | None = None) -> dict[str, Any]:
    """Score the first `n_predictions` attempts of each task (replayed in the sandbox, as `arc-trl evaluate score`).
    `dropped`: the dataset's tasks left unattempted (prompt too long); they count in `n_dataset_tasks` and
    `n_missing_tasks`, as failures in the pass figures (pass_rate, is_correct, pass_at_k.json: over the whole
    dataset; `*_attempted`: over the attempted tasks), listed as `dropped_task_ids`."""
    from arc_trl.eval.passk import write_pass_at_k
    from arc_trl.eval.score import score_completions, write_outputs
    from arc_trl.eval.summary import print_summary
    from arc_trl.eval.tables import write_metrics_table

    start = time.perf_counter()
    path = output_dir / COMPLETIONS_FILE
    order = {task.id: i for i, task in enumerate(tasks)}
    records = [r for r in read_completions_file(path) if r["task_id"] in order and r["attempt"] < n_predictions]
    if not records:
        raise GenerateInputError(f"{path}: no attempt to score")
    records.sort(key=lambda r: (order[r["task_id"]], r["attempt"]))
    metrics, rows = score_completions([*tasks, *dropped], records, workers, config, mode=agent_mode, where=str(path),
                                      progress=progress)
    metrics = {"dataset": dataset, "completions": str(path), **metrics, "n_dropped_tasks": len(dropped),
               "dropped_task_ids": sorted(t.id for t in dropped), "seconds": round(time.perf_counter() - start, 3)}
    write_outputs(output_dir, metrics, rows)
    write_pass_at_k(output_dir)
    write_metrics_table(output_dir, echo=True)
    print_summary(output_dir, [*tasks, *dropped], per_task=per_task)  # pass@1/2/k, Kaggle, why attempts failed
    if wandb_project:  # the folder as a W&B run: its figures and a table of tasks (arc_trl/view/wandb_tables.py)
        from arc_trl.view.wandb_tables import log_eval_folder

        log_eval_folder(output_dir, wandb_project, [*tasks, *dropped])
    return metrics


def task_prompt(task: ArcTask, args: argparse.Namespace, template) -> list[dict[str, str]]:
    """The initial messages of an attempt: the student prompt, or with `--privileged` the teacher's privileged variant
    (reference program or test outputs appended), to measure what a privileged teacher solves when shown its hint."""
    from arc_trl.data import render_messages

    privileged = getattr(args, "privileged", None) or "none"
    try:
        return render_messages(task, args.agent_mode, template, privileged=privileged)
    except ValueError as e:  # e.g. --privileged program on a task without a reference program
        raise GenerateInputError(f"--privileged {privileged}: {e}") from None


def select_tasks(args: argparse.Namespace) -> list[ArcTask]:
    from arc_trl.tasks import load_tasks

    try:
        tasks = load_tasks(args.dataset, solutions=args.solutions, ids=args.task_ids)
    except LookupError as e:
        raise GenerateInputError(f"--task-ids: {e}") from None
    except (OSError, ValueError) as e:  # TaskValidationError is a ValueError
        raise GenerateInputError(f"cannot load dataset {args.dataset!r}: {e}") from None
    return tasks


@dataclass
class Plan:
    """Everything a run needs, checked before any model is loaded."""

    args: argparse.Namespace
    output_dir: Path
    tasks: list[ArcTask]
    jobs: list[Job]
    tokenizer: Any
    template: Any  # PromptTemplate
    template_choice: str
    template_kwargs: dict[str, Any]
    sandbox_config: Any  # SandboxConfig
    sampling: dict[str, Any]  # the content of sampling.json
    dropped: list[ArcTask] = field(default_factory=list)  # prompts over --max-prompt-tokens: unattempted, score 0

    @property
    def completions(self) -> Path:
        return self.output_dir / COMPLETIONS_FILE


def prepare(args: argparse.Namespace) -> Plan:
    """Resolve the options, load tasks and tokenizer, check the folder, list the missing attempts.

    Raises GenerateInputError."""
    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import load_template
    from arc_trl.sandbox import SandboxConfig

    args = resolve_options(args)
    if args.batch_size is None:
        args.batch_size = 128 if args.backend == "vllm" else 8
    output_dir = Path(args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise GenerateInputError(f"--output-dir {output_dir} exists and is not a folder")
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        sandbox_config = SandboxConfig(timeout_s=args.timeout_s, memory_mb=args.memory_mb,
                                       max_output_chars=args.max_output_chars,
                                       check_transform=bool(args.check_transform and args.agent_mode == "repl"))
        template = load_template(args.prompt_template, args.agent_mode)
    except (ValueError, OSError) as e:
        raise GenerateInputError(str(e)) from None
    tasks = select_tasks(args)
    if args.privileged == "program" and args.augment:
        raise GenerateInputError("--privileged program with --augment: the reference program solves the original "
                                 "task, not its augmented copies")
    if args.privileged != "none":
        for task in tasks:  # fail before any model is loaded when a task lacks its hint
            task_prompt(task, args, template)
    try:
        tokenizer, template_choice = load_tokenizer(args.model, args.chat_template)
    except (OSError, ValueError) as e:
        raise GenerateInputError(f"cannot load the tokenizer of {args.model!r}: {e}") from None
    template_kwargs = args.chat_template_kwargs or {}
    existing = read_completions_file(output_dir / COMPLETIONS_FILE)
    sampling = check_settings(output_dir, matched_settings(args, tokenizer), has_attempts=bool(existing))
    dropped: list[ArcTask] = []
    if args.max_prompt_tokens:
        fits = [len(prompt_ids(tokenizer, task_prompt(t, args, template), **template_kwargs)) <= args.max_prompt_tokens
                for t in tasks]
        kept_at = [i for i, fit in enumerate(fits) if fit]
        if not kept_at:
            raise GenerateInputError(f"every task's prompt is longer than --max-prompt-tokens {args.max_prompt_tokens}")
        # --max-tasks K: the first K tasks that fit; a dropped task is in the selection when it comes before the last
        # of them in the dataset's order (all of them when K covers every task that fits)
        last = kept_at[args.max_tasks - 1] if args.max_tasks and args.max_tasks < len(kept_at) else len(tasks)
        dropped = [t for i, (t, fit) in enumerate(zip(tasks, fits)) if not fit and i < last]
        kept = [tasks[i] for i in kept_at]
        if dropped:
            print(f"[generate] {len(dropped)} task(s) dropped: prompt longer than {args.max_prompt_tokens} tokens; "
                  "they stay in the scores as unattempted (n_dropped_tasks)", file=sys.stderr)
        tasks = kept
    tasks = tasks[: args.max_tasks] if args.max_tasks else tasks  # after the length filter, as in training
    done = {(r["task_id"], r["attempt"]) for r in existing}
    jobs = plan_jobs(tasks, args.n_predictions, done, args.augment, args.seed)
    return Plan(args, output_dir, tasks, jobs, tokenizer, template, template_choice, template_kwargs, sandbox_config,
                sampling, dropped)


def generate(plan: Plan, generator=None) -> dict[str, Any]:
    """Generate the plan's missing attempts into completions.jsonl; returns this run's entry of sampling.json.
    `generator`: an engine built already (`build_generator`) for the plan's model and sampling options, shared by
    several plans (one engine start for many folders); its context must hold the plan's longest episode."""
    from arc_trl.chat_template import prompt_ids
    from arc_trl.rollout import RolloutSettings
    from arc_trl.sandbox import SandboxPool

    args, tokenizer = plan.args, plan.tokenizer
    prompts = [task_prompt(job.task, args, plan.template) for job in plan.jobs]
    longest = max(len(prompt_ids(tokenizer, p, **plan.template_kwargs)) for p in prompts)
    max_model_len = args.max_model_len or longest + args.max_completion_length
    run: dict[str, Any] = {
        "started": datetime.datetime.now().isoformat(timespec="seconds"), "seed": args.seed, "backend": args.backend,
        "n_predictions": args.n_predictions, "n_tasks": len(plan.tasks), "max_model_len": max_model_len,
        "chat_template_choice": plan.template_choice, "argv": sys.argv,
        "versions": package_versions(args.backend, args.adapter is not None), "completed": False,
    }
    plan.sampling["runs"].append(run)
    write_json(plan.output_dir / SAMPLING_FILE, plan.sampling)
    rollout = RolloutSettings(args.agent_mode, args.max_turns, args.max_tokens_per_turn, args.max_completion_length,
                              scheduling=args.rollout_scheduling)
    shared = generator is not None
    if shared and getattr(generator, "sampling", None) is not None:  # a shared engine samples as this plan says
        from arc_trl.eval.generation_backends import sampling_options

        wanted = {**sampling_options(args), "stop_token_ids": list(eos_token_ids(args.model, tokenizer))}
        if generator.sampling != wanted:
            raise GenerateInputError(f"the shared engine samples with {generator.sampling}, this folder asks for "
                                     f"{wanted}: give it its own engine")
    run["shared_engine"] = shared
    with contextlib.ExitStack() as stack:
        if generator is None:
            generator = build_generator(args, tokenizer, eos_token_ids(args.model, tokenizer), max_model_len, stack)
        pool = stack.enter_context(SandboxPool(num_workers=args.workers, config=plan.sandbox_config))
        out = stack.enter_context(open(plan.completions, "a", encoding="utf-8"))

        def write(record: dict[str, Any]) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        try:
            generate_attempts(plan.jobs, prompts, generator, tokenizer, pool, rollout, plan.template_kwargs,
                              args.batch_size, write, run, progress=not args.no_progress)
            run["completed"] = True
        finally:  # an interrupted run is recorded too
            write_json(plan.output_dir / SAMPLING_FILE, plan.sampling)
    return run


def score_plan(plan: Plan) -> None:
    """Score the plan's folder as `generate` does after generating (its first `--n-predictions` attempts a task):
    what a separate process calls to score a folder generated with `--no-score` (`prepare` first: no engine)."""
    args = plan.args
    # replays score what the code left: with the transform check, the `transform` a completion defines is what the
    # check submitted, which a plain REPL replay (SUBMIT only) would not see
    replay_config = replace(plan.sandbox_config, check_transform=False)
    mode = "auto" if plan.sandbox_config.check_transform else args.agent_mode
    score_folder(plan.output_dir, plan.tasks, args.n_predictions, args.dataset, mode, args.workers, replay_config,
                 progress=not args.no_progress, dropped=plan.dropped, per_task=getattr(args, "per_task", False),
                 wandb_project=getattr(args, "wandb_project", None))


def run_generate(args: argparse.Namespace, generator=None) -> int:
    """Run `generate` (with `generator`: see `generate`); returns the exit code (0 done, 2 bad arguments, inputs or
    output folder, 130 interrupted)."""
    started = time.perf_counter()
    try:
        plan = prepare(args)
        args = plan.args
        total = len(plan.tasks) * args.n_predictions
        print(f"[generate] {len(plan.tasks)} tasks x {args.n_predictions} attempts: {len(plan.jobs)} to generate, "
              f"{total - len(plan.jobs)} already in {plan.completions}; chat template: {plan.template_choice}",
              file=sys.stderr)
        if plan.jobs:
            run = generate(plan, generator)
            print(f"[generate] {run['attempts']} attempts, {run['model_tokens']} model tokens in {run['seconds']} s "
                  f"({run['model_tokens_per_s']} tokens/s)", file=sys.stderr)
        elif not (plan.output_dir / SAMPLING_FILE).is_file():
            write_json(plan.output_dir / SAMPLING_FILE, plan.sampling)
        if not args.no_score:
            score_plan(plan)
    except GenerateInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: the attempts finished so far are saved in {args.output_dir}/{COMPLETIONS_FILE}; rerun "
              "the same command to generate the rest", file=sys.stderr)
        return 130
    print(f"[generate] done in {time.perf_counter() - started:.1f} s: {args.output_dir}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------------------------------------------------
# command line


def add_generate_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options left at None take their value from --train-config, else the default shown (`CONFIGURABLE`)."""
    p = parser.add_argument

    def d(option: str) -> Any:  # the built-in default of an option left at None (written once: arc_trl.config.defaults)
        return CONFIGURABLE[option][1]

    p("--model", default=None, help="model folder or hub id (the base model when --adapter is given)")
    p("--adapter", default=None, help="PEFT LoRA checkpoint to apply, e.g. outputs/run/checkpoint-20")
    p("--dataset", required=True, help="dataset name (arc-agi-1/eval), Kaggle challenges JSON, or task folder")
    p("--solutions", default=None, help="Kaggle solutions file, when not beside the challenges")
    p("--output-dir", required=True, help="folder for completions.jsonl, sampling.json and the scores")
    p("--n-predictions", type=int, default=8, help="attempts per task (default 8)")
    p("--train-config", default=None,
      help="training YAML or a run's arc_trl_config.json: default agent, sampling and sandbox settings")
    p("--agent-mode", choices=AGENT_MODES, default=None, help=f"repl or program (default {d('agent_mode')})")
    p("--max-turns", type=int, default=None, help=f"assistant turns per episode (default {d('max_turns')})")
    p("--max-tokens-per-turn", type=int, default=None, help="token cap per turn (default: the episode budget)")
    p("--max-completion-length", type=int, default=None,
      help=f"token budget of an episode, model + environment tokens (default {d('max_completion_length')})")
    p("--max-prompt-tokens", type=int, default=None, help="skip tasks whose prompt is longer than this")
    p("--rollout-scheduling", choices=ROLLOUT_SCHEDULINGS, default=None,
      help="lockstep: each turn, all episodes of a batch generate together, or per_episode: each episode advances "
           f"on its own (vLLM backend; transformers falls back to lockstep); default {d('rollout_scheduling')}")
    p("--check-transform", action="store_const", const=True, default=None,
      help="REPL: a message defining transform(grid) gets it checked on the training pairs and its test outputs "
           "submitted when all match (use with a prompt that says so, e.g. configs/prompts/coder-repl.yaml)")
    p("--temperature", type=float, default=None, help=f"sampling temperature (default {d('temperature')}; 0 = greedy)")
    p("--top-p", type=float, default=None, help=f"default {d('top_p')}")
    p("--top-k", type=int, default=None, help=f"default {d('top_k')} (0: off)")
    p("--min-p", type=float, default=None, help=f"default {d('min_p')} (0: off)")
    p("--repetition-penalty", type=float, default=None, help=f"default {d('repetition_penalty')}")
    p("--prompt-template", default=None, help="custom prompt template (YAML), as in training")
    p("--chat-template", default=None,
      help=f"auto | chatml | path to a .jinja file, as in training (default {d('chat_template')})")
    p("--chat-template-kwargs", default=None, help='JSON object, e.g. \'{"enable_thinking": false}\'')
    p("--privileged", choices=("none", "program", "solutions"), default="none",
      help="prompt with the privileged teacher variant: the reference program (synthetic tasks) or the test outputs "
           "appended to the user message; the solve rate of a privileged OPD teacher shown its hint (default none)")
    p("--augment", action="store_true",
      help="each attempt sees a random dihedral + colour augmentation of its task (fixed per seed/task/attempt)")
    p("--backend", choices=BACKENDS, default="vllm", help="vllm (default) or transformers")
    p("--batch-size", type=int, default=None,
      help="episodes in play at once (per_episode: a new one starts as one ends; lockstep: batch after batch; "
           "default: vllm 128, transformers 8)")
    p("--max-tasks", type=int, default=None, help="only the first K tasks (sorted by id, after --max-prompt-tokens)")
    p("--task-ids", nargs="+", default=None, help="only these task ids")
    p("--seed", type=int, default=0, help="sampling seed, also of the augmentations (default 0)")
    p("--workers", type=int, default=min(defaults.SANDBOX_WORKERS, os.cpu_count() or 1),
      help=f"sandbox processes (default min({defaults.SANDBOX_WORKERS}, CPUs))")
    p("--timeout-s", type=float, default=None, help=f"CPU-time limit per code run (default {d('timeout_s'):g})")
    p("--memory-mb", type=int, default=None, help=f"address space of a sandbox process, MB (default {d('memory_mb')})")
    p("--max-output-chars", type=int, default=None,
      help=f"stdout/stderr kept per code run (default {d('max_output_chars')})")
    p("--dtype", default=None, help=f"model dtype: auto, float32, bfloat16, ... (default {d('dtype')})")
    p("--max-model-len", type=int, default=None, help="vLLM context (default: longest prompt + episode budget)")
    p("--gpu-memory-utilization", type=float, default=0.9, help="vLLM (default 0.9)")
    p("--kv-cache-memory-gib", type=float, default=None,
      help="vLLM: the KV cache in GiB, not sized by the start-up memory profile (that profile fails when another "
      "process on the GPU frees memory meanwhile: a training beside it); default: profiled")
    p("--tensor-parallel-size", type=int, default=1, help="vLLM (default 1)")
    p("--enforce-eager", action="store_true", help="vLLM: no CUDA graphs / compilation (faster start)")
    p("--no-score", action="store_true", help="only generate")
    p("--per-task", action="store_true", help="also print one row per task (passes, best pixel score, attempt kinds)")
    p("--wandb-project", default=None,
      help="also log the scores and a table of tasks (with their grids) as a W&B run of this project; wandb/ goes "
           "under --output-dir (WANDB_MODE=offline: no network)")
    p("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_generate_arguments(argparse.ArgumentParser(description="Sample attempts with the training agent "
                                                                        "and score them (see the module docstring)."))
    return run_generate(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
