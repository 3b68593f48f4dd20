"""`arc-trl ttrl`: test-time RL on tasks whose test outputs are unknown (the Kaggle setting), then a submission.

    arc-trl ttrl --config configs/ttrl-tiny-cpu.yaml --dataset CHALLENGES.json --output_dir OUT

For each task: GRPO on its leave-one-out episodes (`arc_trl.ttrl.leave_one_out`) from the start model (one trainer
for the run, reset to it before every task: `arc_trl.ttrl.shared_trainer`), within the budgets (`max_steps`,
`task_max_seconds`, `total_max_seconds`), then `n_attempts` episodes on its test inputs with the adapted policy;
finally `OUT/submission.json`, validated, two attempts per test input. The config is `arc-trl train`'s (one YAML,
flags override it) plus `TtrlArguments` (`arc_trl/ttrl/settings.py`); `dataset`, `task_ids` and `max_tasks` pick the
tasks. Rerunning the command resumes: finished tasks are skipped. docs/ttrl.md.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arc_trl.ttrl.settings import TtrlArguments, ttrl_config_problems

START_MODEL = "start_model"  # OUT/start_model: the base with `adapter` merged in


def parse(argv: list[str]) -> tuple:
    """(script, arc, args, model_args, ttrl) from `--config` + flags, or SystemExit with one line naming the key."""
    from arc_trl.train_entry import parse_config_with

    config = argv[argv.index("--config") + 1] if "--config" in argv else None
    where = config or "command line"
    script, arc, args, model_args, ttrl = parse_config_with(argv, extra=(TtrlArguments,), command="ttrl")
    problems = ttrl_config_problems(script, arc)
    if script.use_unsloth:
        problems.append("use_unsloth: not supported by ttrl; set it false")
    if problems:
        raise SystemExit(f"error in {where}: " + "; ".join(problems))
    if ttrl.adapter is not None and not Path(ttrl.adapter, "adapter_config.json").is_file():
        raise SystemExit(f"error in {where}: adapter {ttrl.adapter}: no adapter_config.json there (a PEFT LoRA "
                         "folder, e.g. a run's checkpoint-N)")
    return script, arc, args, model_args, ttrl


def load_hidden_tasks(script) -> list:
    """The run's tasks without their test outputs (a solver's view; the scorer reads the solutions itself)."""
    from arc_trl.train_entry import load_run_tasks

    tasks, _ = load_run_tasks(script)
    if script.max_tasks:
        tasks = tasks[: script.max_tasks]
    return [task.without_solutions() for task in tasks]


def start_model(model_args, ttrl, out: Path, tokenizer) -> str:
    """The model every task starts from: the base, or with `adapter` merged into `out/start_model` (once: a rerun
    reuses it when it was merged from the same base and adapter)."""
    base = str(model_args.model_name_or_path)
    if ttrl.adapter is None:
        return base
    from arc_trl.eval.generation_backends import merge_adapter_to

    folder, marker = out / START_MODEL, {"base": base, "adapter": str(Path(ttrl.adapter).resolve())}
    made = folder / "merged_from.json"
    if made.is_file() and json.loads(made.read_text()) == marker:
        return str(folder)
    tmp = out / (START_MODEL + ".tmp")
    merge_adapter_to(base, ttrl.adapter, model_args.dtype or "auto", tmp, tokenizer)
    (tmp / "merged_from.json").write_text(json.dumps(marker))
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    tmp.rename(folder)
    return str(folder)


def run(argv: Sequence[str], clock: Callable[[], float] = time.monotonic,
        trainer_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The command (`main`); returns the run's summary. `clock` and `trainer_kwargs`: for tests."""
    from trl import get_peft_config

    from arc_trl.train_entry import load_tokenizer, model_init_kwargs
    from arc_trl.ttrl.adapt import AdaptingRunner, RunContext
    from arc_trl.ttrl.budget import Budget
    from arc_trl.ttrl.loop import run_tasks
    from arc_trl.ttrl.leave_one_out import leave_one_out_tasks
    from arc_trl.ttrl.submission import SUMMARY_FILE, write_ttrl_submission

    argv = list(argv)
    script, arc, args, model_args, ttrl = parse(argv)
    budget = Budget(ttrl.task_max_seconds, ttrl.total_max_seconds, ttrl.reserve_seconds, clock)
    budget.begin()
    tasks = load_hidden_tasks(script)
    out = Path(args.output_dir)
    tokenizer, template_choice = load_tokenizer(model_args, script.chat_template, args.trust_remote_code)
    args.model_init_kwargs = {**model_init_kwargs(model_args, args.trust_remote_code), **(args.model_init_kwargs or {})}
    context = RunContext(model=str(model_args.model_name_or_path), tokenizer=tokenizer, script=script, arc=arc,
                         args=args, ttrl=ttrl, peft_config=get_peft_config(model_args), clock=clock,
                         trainer_kwargs=dict(trainer_kwargs or {}))
    runner = AdaptingRunner(context)
    single = [t.id for t in tasks if len(t.train) < 2]
    print(f"[ttrl] {len(tasks)} tasks from {script.dataset} ({len(single)} with a single training pair: attempted "
          f"unadapted); chat template: {template_choice}; output: {out}")
    if script.check_config:
        for task in tasks:
            print(f"[ttrl] {task.id}: {len(task.train)} training pairs -> "
                  f"{len(runner.rows(leave_one_out_tasks(task), augment=True))} leave-one-out prompts within "
                  f"max_prompt_tokens {script.max_prompt_tokens}")
        print("[ttrl] preflight passed (check_config): nothing trained, nothing written")
        return {"n_tasks": len(tasks), "check_config": True}
    out.mkdir(parents=True, exist_ok=True)
    context.model = start_model(model_args, ttrl, out, tokenizer)
    with runner:  # one trainer for every task (built at the first that runs), closed after the last
        report = run_tasks(tasks, out, runner, budget)
    summary = write_ttrl_submission(out, tasks, ttrl.fallback)
    summary.update(seconds=round(budget.elapsed(), 3), ran=report.ran, skipped_done=report.skipped_done,
                   not_started=report.not_started, not_adapted=report.not_adapted,
                   budgets={"max_steps": args.max_steps, "task_max_seconds": ttrl.task_max_seconds,
                            "total_max_seconds": ttrl.total_max_seconds, "reserve_seconds": ttrl.reserve_seconds})
    print(f"[ttrl] wrote {summary['submission']} (validated): {summary['n_tasks']} tasks, {summary['n_test_inputs']} "
          f"test inputs, attempt_1 predicted for {summary['attempt_1_predicted']}, attempt_2 for "
          f"{summary['attempt_2_predicted']}, the rest placeholders ({ttrl.fallback}); {summary['seconds']:.1f} s")
    if summary["tasks_without_attempts"]:
        print(f"[ttrl] tasks without attempts (placeholders only): {', '.join(summary['tasks_without_attempts'])}")
    if report.not_adapted:
        print("[ttrl] not adapted: " + "; ".join(f"{k} ({v})" for k, v in report.not_adapted.items()))
    if ttrl.score:
        summary["score"] = score_after(script, ttrl, tasks, summary["submission"])
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=str))
    return summary


def score_after(script, ttrl, tasks: list, submission: str) -> dict[str, Any] | None:
    """The written submission's score: the solutions are loaded only here, after the file exists."""
    from arc_trl.tasks import load_tasks
    from arc_trl.ttrl.submission import score_written

    try:
        solved = load_tasks(script.dataset, solutions=ttrl.solutions, ids=[t.id for t in tasks])
    except (OSError, ValueError, LookupError) as exc:
        print(f"[ttrl] score: cannot read the solutions of {script.dataset}: {exc}", file=sys.stderr)
        return None
    result = score_written(submission, solved)
    if result is None:
        print(f"[ttrl] score: {script.dataset} has no solutions to score against")
    else:
        print(f"[ttrl] score: {100 * result['score']:.2f}% over {result['n_scored_tasks']} tasks "
              f"({result['n_correct']}/{result['n_test_inputs']} test inputs correct)")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        run(argv)
    except KeyboardInterrupt:
        print("\n[ttrl] interrupted: finished tasks are kept (done.json); rerun the same command to resume",
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
