"""Supervised warm start on reference episodes of synthetic tasks (TRL SFTTrainer, assistant-only loss).

    arc-trl sft --config configs/sft-tiny-cpu.yaml [--key value ...]
    accelerate launch -m arc_trl sft --config configs/X.yaml          # GPU, several processes

The YAML is a flat mapping of `trl.SFTConfig`, `trl.ModelConfig` and `SftArguments` keys (below). Only the assistant
turns are trained on (environment replies and prompts are masked), which is the completion-only loss of multi-turn
data.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from arc_trl.config import defaults
from arc_trl.config.choices import AGENT_MODES


@dataclass
class SftArguments:
    dataset: str = field(
        default="synthetic:n=256,seed=0,difficulty=tiny",
        metadata={"help": "Tasks with reference programs: a synthetic: spec or a folder from `arc-trl synthetic`"},
    )
    agent_mode: str = field(default=defaults.AGENT_MODE, metadata={"help": " | ".join(AGENT_MODES)})
    prompt_template: str | None = field(default=None, metadata={"help": "Custom prompt template (YAML)."})
    chat_template: str = field(
        default=defaults.CHAT_TEMPLATE, metadata={"help": "auto | chatml | path (see arc-trl train)."}
    )
    sandbox_workers: int = field(default=2, metadata={"help": "Sandbox processes used to replay REPL episodes."})
    transcripts: str | None = field(
        default=None,
        metadata={"help": "Comma-separated JSONL files of conversations (`arc-trl transcripts`: a model's solved and "
                  "hindsight-relabelled episodes), trained on beside the dataset's reference episodes (dataset: "
                  "none for the transcripts alone)."},
    )
    check_transform: bool = field(
        default=False,
        metadata={"help": "REPL reference episodes in the coder prompt's convention: one turn, the program, which the "
                  "sandbox's transform check submits (use with configs/prompts/coder-repl.yaml)."},
    )
    max_train_seconds: float | None = field(
        default=None,
        metadata={"help": "wall-clock budget of training: it ends after the first optimizer step past it (the model "
                  "saved as after a normal end; the learning-rate schedule is the full run's)."},
    )
    privileged: str = field(
        default="none",
        metadata={"help": "none | program | solutions: train on the privileged teacher prompt (the reference "
                  "program or the test outputs appended to the user message), to build a privileged OPD teacher "
                  "that uses its hint (arc-trl train: teacher_privileged with the same value)."},
    )


def main(argv: list[str] | None = None):
    from transformers import AutoTokenizer
    from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser, get_peft_config

    from arc_trl.chat_template import resolve_chat_template
    from arc_trl.data import load_template
    from arc_trl.tasks import load_tasks
    from arc_trl.sandbox import SandboxConfig, SandboxPool
    from arc_trl.sft_data import build_sft_dataset
    from arc_trl.synthetic import load_synthetic

    parser = TrlParser((SftArguments, SFTConfig, ModelConfig))
    sft_args, args, model_args = parser.parse_args_and_config(argv)
    from arc_trl.models.model_path import missing_model_folder

    if problem := missing_model_folder(str(model_args.model_name_or_path)):  # one line, no hub call for a path
        given = list(sys.argv[1:] if argv is None else argv)
        where = f" in {given[given.index('--config') + 1]}" if "--config" in given[:-1] else ""
        raise SystemExit(f"error{where}: {problem}")
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    resolve_chat_template(tokenizer, sft_args.chat_template)
    template = load_template(sft_args.prompt_template, sft_args.agent_mode) if sft_args.prompt_template else None
    dataset = None
    if sft_args.dataset not in ("", "none"):
        path = Path(sft_args.dataset)
        has_sidecar = path.is_dir() and (path / "metadata.jsonl").exists()
        tasks = load_synthetic(path) if has_sidecar else load_tasks(sft_args.dataset)
        config = SandboxConfig(check_transform=sft_args.check_transform and sft_args.agent_mode == "repl")
        with SandboxPool(num_workers=sft_args.sandbox_workers, config=config) as pool:
            dataset, report = build_sft_dataset(tasks, sft_args.agent_mode, pool, template,
                                                privileged=sft_args.privileged)
        hint = "" if sft_args.privileged == "none" else f", privileged prompts ({sft_args.privileged})"
        print(f"[sft] {report.kept} reference episodes ({report.dropped} dropped) from {sft_args.dataset}{hint}")
    if sft_args.transcripts:
        dataset = with_transcripts(dataset, [p for p in sft_args.transcripts.split(",") if p.strip()])
    if dataset is None:
        raise SystemExit("arc-trl sft: nothing to train on: dataset is none and no transcripts are given")
    args.assistant_only_loss = True
    args.model_init_kwargs = {**(args.model_init_kwargs or {}), "dtype": model_args.dtype or "auto"}
    trainer = SFTTrainer(
        model=model_args.model_name_or_path,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=get_peft_config(model_args),
    )
    budget = None
    if sft_args.max_train_seconds is not None:
        from arc_trl.trainer.time_budget import TimeBudgetCallback

        budget = TimeBudgetCallback(sft_args.max_train_seconds)
        trainer.add_callback(budget)
    trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
    if budget is not None and budget.stopped_at_step is not None:
        print(f"[sft] stopped at the time budget ({sft_args.max_train_seconds:g} s) after step "
              f"{budget.stopped_at_step} of {trainer.state.max_steps}")
    trainer.save_model(args.output_dir)
    tokenizer.save_pretrained(args.output_dir)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    if losses:
        print(f"[sft] done: {trainer.state.global_step} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
              f"saved to {args.output_dir}")
    return trainer


def with_transcripts(dataset, paths: list[str]):
    """`dataset` (or none) with the conversations of transcript files appended (`messages` and `task_id` columns)."""
    from collections import Counter

    from datasets import Dataset, concatenate_datasets

    from arc_trl.warmstart.transcripts import read_transcripts

    rows = read_transcripts(paths)
    kinds = Counter(row.pop("kind") or "unlabelled" for row in rows)
    print(f"[sft] {len(rows)} transcripts ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}) from "
          f"{', '.join(paths)}")
    extra = Dataset.from_list(rows)
    if dataset is None:
        return extra
    return concatenate_datasets([dataset.select_columns(["messages", "task_id"]), extra])


if __name__ == "__main__":
    main()
