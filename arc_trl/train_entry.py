"""The body of `arc-trl train` (and of `scripts/train.py`, for `accelerate launch`): parse the config, build
data/model/trainer, train, save, summarise.

The YAML's keys land in four dataclasses, TRL's script idiom: `ArcScriptArguments` (what only this script and the
launchers read: the tasks, tokenizer and model loading, the GPU layout), `ArcConfig` (what the trainer reads),
`GRPOConfig` and `ModelConfig`. Everything `ArcConfig` asks for (evaluation callback, collapse guard, stop and
rollback) is the trainer's own doing, so this script calls `trainer.train()` like any Python caller.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from trl import GRPOConfig, ModelConfig, TrlParser

from arc_trl.config import ArcConfig
from arc_trl.run_summary import format_outcome, format_step_budget, summarise  # noqa: F401  (their old home)
from arc_trl.config.type_checks import value_type_problems
from arc_trl.config.script_args import ArcScriptArguments

CONFIG_CLASSES = (ArcScriptArguments, ArcConfig, GRPOConfig, ModelConfig)  # the order parse_config returns them in


def parse_config(argv: list[str] | None = None) -> tuple[ArcScriptArguments, ArcConfig, GRPOConfig, ModelConfig]:
    """Parse `--config FILE.yaml` plus CLI overrides into the four dataclasses, with file-named errors."""
    script, arc, args, model_args = parse_config_with(argv)
    return script, arc, args, model_args


def parse_config_with(argv: list[str] | None = None, extra: tuple[type, ...] = (), command: str = "train") -> tuple:
    """`parse_config`, with `extra` dataclasses (another command's own keys, e.g. `arc-trl ttrl`'s) read from the same
    YAML and flags: their instances follow the four. `command` names the subcommand in the errors' `--help` hint."""
    argv = list(sys.argv[1:] if argv is None else argv)
    config_path = argv[argv.index("--config") + 1] if "--config" in argv else None
    if config_path is not None and not Path(config_path).is_file():
        raise SystemExit(f"error: config file {config_path} does not exist")
    classes = CONFIG_CLASSES + tuple(extra)
    if config_path is not None:
        check_config_keys(config_path, classes, command)
    parser = _ShortErrorParser(classes, config_path=config_path, argv=argv)
    try:
        parsed = parser.parse_args_and_config(argv)
        script, arc, args, model_args = parsed[:4]
    except ValueError as exc:
        if str(exc).startswith("Some specified arguments are not used"):  # HfArgumentParser: unknown CLI flags
            raise SystemExit(f"error on the command line: {exc} (`--help` lists every key)") from exc
        where = f" in {config_path}" if config_path else ""
        raise SystemExit(f"error{where}: {exc}") from exc
    if model_args.model_name_or_path is None:
        raise SystemExit(f"error: model_name_or_path is not set ({config_path or 'command line'})")
    try:
        arc.check_with(args)
        if arc.eval_every_steps > 0 and script.eval_dataset is None:
            raise ValueError("eval_every_steps > 0 needs eval_dataset (the held-out tasks to play)")
    except ValueError as exc:
        raise SystemExit(f"error in {config_path or 'command line'}: {exc}") from exc
    if script.use_unsloth:  # config-only checks, before any model or data is loaded
        from arc_trl.integrations.unsloth_support import UnslothConfigError, check_unsloth_config

        try:
            check_unsloth_config(args, model_args)
        except UnslothConfigError as exc:
            raise SystemExit(f"error in {config_path or 'command line'}: {exc}") from exc
    from arc_trl.models.model_path import missing_model_folder

    # after the config's own checks: a missing local model folder is one line, with no hub call for a path
    if problem := missing_model_folder(str(model_args.model_name_or_path)):
        raise SystemExit(f"error in {config_path or 'command line'}: {problem}")
    return tuple(parsed)


class _ShortErrorParser(TrlParser):
    """`TrlParser` whose argparse errors are one line naming where the value came from. argparse's own `error` hook
    (overridden here) prints the usage of every key of the three dataclasses (~230 lines) before the reason."""

    def __init__(self, dataclass_types, config_path: str | None, argv: list[str]) -> None:
        # no abbreviations: `--max_turn 3` was taken for --max_turns, where the YAML key max_turn is refused
        super().__init__(dataclass_types, allow_abbrev=False)
        self._config_path, self._argv = config_path, argv

    def parse_known_args(self, args=None, namespace=None):
        # argparse's hook that HfArgumentParser calls before building each dataclass: check the value types of
        # ArcScriptArguments and ArcConfig here, so that one error names every wrongly typed key of both (each
        # dataclass's own __post_init__ check would stop at the first dataclass with one)
        parsed, remaining = super().parse_known_args(args, namespace)
        values = vars(parsed)
        problems = [line for cls in CONFIG_CLASSES[:2] for line in value_type_problems(cls, values)]
        if problems:
            raise ValueError("wrong value types:\n  " + "\n  ".join(problems))
        return parsed, remaining

    def error(self, message: str):
        # "argument --num_generations: invalid int value: 'four'": a flag given on the command line, else a YAML value
        # (YAML strings reach argparse as defaults and are converted like flags)
        flag = message.split(":", 1)[0].removeprefix("argument ").split("/")[0].strip().replace("-", "_")
        given = {arg.split("=")[0].replace("-", "_") for arg in self._argv if arg.startswith("--")}
        from_yaml = self._config_path is not None and flag.startswith("__") and flag not in given
        where = f" in {self._config_path}" if from_yaml else " on the command line" if flag.startswith("__") else ""
        raise SystemExit(f"error{where}: {message} (`--help` lists every key)")


def known_keys(classes: tuple[type, ...] = CONFIG_CLASSES) -> set[str]:
    return {f.name for cls in classes for f in dataclasses.fields(cls)} | {"env"}


def check_config_keys(config_path: str, classes: tuple[type, ...] = CONFIG_CLASSES, command: str = "train") -> None:
    """Fail on unknown YAML keys up front, naming the file, the keys and the closest known key."""
    import difflib

    import yaml

    with open(config_path) as f:
        try:
            config = yaml.safe_load(f)
        except yaml.YAMLError as exc:
            raise SystemExit(f"error: {config_path} is not valid YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise SystemExit(f"error: {config_path} must contain a YAML mapping of config keys")
    keys = known_keys(classes)
    unknown = [k for k in config if k not in keys]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, keys, n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise SystemExit(f"error in {config_path}: unknown config keys: {', '.join(hints)}. "
                         f"Run `arc-trl {command} --help` for the list of keys.")
    if quoted := quoted_numbers(config):
        raise SystemExit(f"error in {config_path}: wrong value types:\n  " + "\n  ".join(quoted))


def quoted_numbers(config: dict) -> list[str]:
    """Our keys (ArcScriptArguments, ArcConfig) whose YAML value is text where a number or a boolean is meant:
    argparse would convert `max_turns: "2"` silently, as it does a command-line flag."""
    import typing

    from arc_trl.config.type_checks import accepts, type_name

    problems = []
    for cls in CONFIG_CLASSES[:2]:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            value = config.get(f.name)
            wanted = hints.get(f.name)
            if not isinstance(value, str) or accepts(wanted, value) or "str" in type_name(wanted):
                continue
            hint = " (PyYAML reads 1e-3 without a dot as text: write 1.0e-3)" if "e" in value.lower() else ""
            problems.append(f"{f.name}: got {value!r} (text), expected {type_name(wanted)}: write it unquoted{hint}")
    return problems


def resolved_config(script: ArcScriptArguments, arc: ArcConfig, args: GRPOConfig, model_args: ModelConfig) -> dict:
    """All resolved values, grouped, JSON-serialisable (printed by --check_config, saved next to checkpoints)."""

    def plain(obj):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            try:
                json.dumps(value)
            except TypeError:
                value = str(value)
            out[f.name] = value
        return out

    return {"script": plain(script), "arc": plain(arc), "grpo": plain(args), "model": plain(model_args)}


def load_tokenizer(model_args: ModelConfig, chat_template: str = "auto", trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    from arc_trl.chat_template import resolve_chat_template

    tokenizer = AutoTokenizer.from_pretrained(
        model_args.model_name_or_path,
        revision=model_args.model_revision,
        trust_remote_code=trust_remote_code,
        padding_side="left",
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    choice = resolve_chat_template(tokenizer, chat_template)
    return tokenizer, choice


def load_run_tasks(script: ArcScriptArguments) -> tuple[list, list | None]:
    """The training tasks (`dataset`, `task_ids`) and the held-out ones (`eval_dataset`, None without), or one line
    naming the key and what is wrong (a bad cell, a folder without tasks, an unknown id): before any model loads."""
    from arc_trl.tasks import load_tasks

    def load(key: str, spec: str, ids: list[str] | None) -> list:
        try:
            return load_tasks(spec, ids=ids)
        except LookupError as exc:
            raise SystemExit(f"error: task_ids: {exc}") from exc
        except (OSError, ValueError) as exc:  # TaskValidationError is a ValueError
            raise SystemExit(f"error: {key} {spec}: {exc}") from exc

    train = load("dataset", script.dataset, script.task_ids)
    return train, load("eval_dataset", script.eval_dataset, None) if script.eval_dataset else None


def build_datasets(script: ArcScriptArguments, arc: ArcConfig, tokenizer, seed: int,
                   tasks: tuple[list, list | None] | None = None):
    """The training and evaluation datasets (None without eval_dataset) the script's keys select (`tasks`: those
    `load_run_tasks` loaded already)."""
    from arc_trl.data import build_dataset, load_template

    template = load_template(script.prompt_template, arc.agent_mode) if script.prompt_template else None
    train_tasks, eval_tasks = tasks if tasks is not None else load_run_tasks(script)

    def make(spec: str, augment: bool, training: bool):
        # task_ids / max_tasks select training tasks; the eval set is capped by eval_max_tasks in the callback
        tasks = train_tasks if training else eval_tasks
        dataset = build_dataset(
            tasks,
            arc.agent_mode,
            template=template,
            tokenizer=tokenizer,
            max_prompt_tokens=script.max_prompt_tokens,
            augment=augment,
            copies=script.augment_copies if augment else 1,
            seed=seed,
            # peer: the teacher prompt is built at each batch from the group's episodes (trainer/peer_prompts.py)
            privileged=arc.teacher_privileged if arc.teacher_privileged not in ("none", "peer") else False,
        )
        # after the length filter: keep max_tasks prompts
        if training and script.max_tasks and len(dataset) > script.max_tasks:
            dataset = dataset.select(range(script.max_tasks))
        return dataset

    train = make(script.dataset, script.augment, training=True)
    evaluation = make(script.eval_dataset, False, training=False) if script.eval_dataset else None
    if len(train) == 0:
        raise SystemExit(f"error: no training task left from {script.dataset} (check max_prompt_tokens / task_ids)")
    return train, evaluation


def model_init_kwargs(model_args: ModelConfig, trust_remote_code: bool = False) -> dict:
    from accelerate import PartialState
    from trl import get_quantization_config

    kwargs = {
        "revision": model_args.model_revision,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
        "trust_remote_code": trust_remote_code,
    }
    quantization = get_quantization_config(model_args)
    if quantization is not None:
        kwargs["device_map"] = {"": PartialState().local_process_index}
        kwargs["quantization_config"] = quantization
    return {k: v for k, v in kwargs.items() if v is not None}


def prepare(script: ArcScriptArguments, arc: ArcConfig, args: GRPOConfig, model_args: ModelConfig):
    """The tokenizer, its template choice and the datasets, each failure one line naming its key: the tasks first
    (no model needed), then the tokenizer (the model's folder or hub id), the prompts within `max_prompt_tokens` and
    enough of them for a generation batch. `--check_config true` runs this too (a preflight), then stops."""
    tasks = load_run_tasks(script)
    tokenizer, template_choice = load_tokenizer(model_args, script.chat_template, args.trust_remote_code)
    try:
        train_dataset, eval_dataset = build_datasets(script, arc, tokenizer, args.seed, tasks)
    except ValueError as exc:  # e.g. every prompt longer than max_prompt_tokens: one line, not a traceback
        raise SystemExit(f"error: dataset {script.dataset}: {exc}") from exc
    prompts_per_step = args.generation_batch_size // args.num_generations
    if len(train_dataset) < prompts_per_step:
        raise SystemExit(
            f"error: {script.dataset} gives {len(train_dataset)} prompts but each generation batch needs "
            f"{prompts_per_step} distinct prompts (generation_batch_size {args.generation_batch_size} / "
            f"num_generations {args.num_generations}); use more tasks or a smaller per_device_train_batch_size"
        )
    return tokenizer, template_choice, train_dataset, eval_dataset


def main(argv: list[str] | None = None) -> dict | None:
    script, arc, args, model_args = parse_config(argv)
    started = time.time()
    tokenizer, template_choice, train_dataset, eval_dataset = prepare(script, arc, args, model_args)
    if script.check_config:
        print(json.dumps(resolved_config(script, arc, args, model_args), indent=2, default=str))
        held_out = f", {len(eval_dataset)} held-out" if eval_dataset is not None else ""
        cap = script.max_prompt_tokens or "(no cap)"
        print(f"[arc-trl] preflight passed: {len(train_dataset)} training prompts{held_out} from {script.dataset} "
              f"within max_prompt_tokens {cap}; model {model_args.model_name_or_path}'s tokenizer loaded (chat "
              f"template: {template_choice})", file=sys.stderr)  # stdout: the resolved values alone (JSON)
        return None

    from trl import get_peft_config

    from arc_trl.trainer import ArcGRPOTrainer

    print(f"[arc-trl] {len(train_dataset)} training prompts from {script.dataset}; chat template: {template_choice}")
    args.model_init_kwargs = {**model_init_kwargs(model_args, args.trust_remote_code), **(args.model_init_kwargs or {})}
    model = model_args.model_name_or_path
    peft_config = get_peft_config(model_args)
    if script.use_unsloth:
        from arc_trl.integrations.unsloth_support import load_unsloth_model

        max_seq_length = (script.max_prompt_tokens + args.max_completion_length) if script.max_prompt_tokens else None
        model, tokenizer, peft_config = load_unsloth_model(model_args, args, tokenizer, max_seq_length)

    os.makedirs(args.output_dir, exist_ok=True)
    from arc_trl.models.model_identity import model_fingerprint

    with open(os.path.join(args.output_dir, "arc_trl_config.json"), "w") as f:  # + the build the run starts from
        json.dump({**resolved_config(script, arc, args, model_args),
                   "start_model_fingerprint": model_fingerprint(model_args.model_name_or_path)}, f, indent=2,
                  default=str)
    resume = args.resume_from_checkpoint
    if resume == "auto":
        from transformers.trainer_utils import get_last_checkpoint

        resume = get_last_checkpoint(args.output_dir)
    # the trainer attaches the evaluation callback and the collapse guard itself; its train() stops or rolls back
    trainer = ArcGRPOTrainer(model=model, args=args, arc_config=arc, train_dataset=train_dataset,
                             eval_dataset=eval_dataset, processing_class=tokenizer, peft_config=peft_config)
    try:
        trainer.train(resume_from_checkpoint=resume)
        trainer.save_model(args.output_dir)
        trainer.save_state()  # output_dir/trainer_state.json: the whole log history, for plots
    finally:
        trainer.close()
    summary = summarise(trainer, started)
    if trainer.accelerator.is_main_process:
        with open(os.path.join(args.output_dir, "run_summary.json"), "w") as f:
            json.dump(summary, f, indent=2, default=str)
        print(f"[arc-trl] model saved to {args.output_dir}")  # what the run did: printed by trainer.train()
        print(f"[arc-trl] run: {args.output_dir} (run_summary.json, trainer_state.json); last checkpoint: "
              f"{summary['checkpoint']}; rollouts: {summary['rollouts'] or 'not dumped (set dump_rollouts)'}")
    return summary
