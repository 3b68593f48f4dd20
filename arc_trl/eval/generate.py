"""`evaluate.py generate`: sample attempts with the training agent, save them resumably, then score them.

The agent is the one `ArcGRPOTrainer` trains: the same prompts (`arc_trl.data.render_messages`), the same chat
template resolution (`arc_trl.chat_template.resolve_chat_template`), the same sandbox and episode loop
(`arc_trl.rollout.run_episodes`), with a standalone vLLM engine (`VLLMGenerator`) or transformers `generate`
(`TransformersGenerator`) in place of the trainer's backend.

Files in `--output-dir DIR`:

- `completions.jsonl`: one line per attempt, in the `evaluate.py score` format plus extra fields: `task_id` (the
  original id), `attempt` (index within the task), `completion` (the assistant turns that ran, joined by blank lines:
  replaying it runs the same code blocks in order and reaches the same SUBMIT; a last turn cut by the token cap is
  left out because the episode did not run it either), `augmentation` (with `--augment`: the `Augmentation` string
  of the copy the model saw, "" for the identity), `finish_reason`, `num_turns`, `num_model_tokens`, `outcome`
  (the episode's `AttemptOutcome`) and `messages` (the whole conversation, prompt included). A line is appended and
  flushed as soon as its episode ends.
- `sampling.json`: the settings that define an attempt (`MATCHED_SETTINGS`: model, adapter, dataset, agent and
  sampling options, chat/prompt templates) and one entry per run (seed, backend, versions, throughput). A folder
  never mixes attempts made with different settings: rerunning with other values fails.
- after generation (unless `--no-score`): what `evaluate.py score` writes (`metrics.json`, `per_attempt.jsonl`,
  `metrics.md`, `pass_at_k.json`, `pass_at_k.png`), scoring the first `--n-predictions` attempts of each task.

Resuming: rerunning the same command generates only the (task_id, attempt) pairs missing from `completions.jsonl`;
a torn last line left by a crash is cut off and regenerated. Raising `--n-predictions` adds attempts to a folder.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask

COMPLETIONS_FILE = "completions.jsonl"
SAMPLING_FILE = "sampling.json"
BACKENDS = ("vllm", "transformers")
AGENT_MODES = ("repl", "program")
# What defines an attempt. Attempts made with different values never share a folder.
MATCHED_SETTINGS = (
    "model", "adapter", "dataset", "agent_mode", "max_turns", "max_tokens_per_turn", "max_completion_length",
    "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "augment", "prompt_template",
    "prompt_template_sha256", "chat_template", "chat_template_sha256", "chat_template_kwargs", "sandbox_timeout_s",
    "sandbox_memory_mb", "sandbox_max_output_chars",
)
# option -> (training config key, built-in default). Precedence: command line, then --train-config, then default.
CONFIGURABLE: dict[str, tuple[str, Any]] = {
    "model": ("model_name_or_path", None),
    "dtype": ("dtype", "auto"),
    "agent_mode": ("agent_mode", "repl"),
    "max_turns": ("max_turns", 4),
    "max_tokens_per_turn": ("max_tokens_per_turn", None),
    "max_completion_length": ("max_completion_length", 1024),
    "max_prompt_tokens": ("max_prompt_tokens", None),
    "temperature": ("temperature", 1.0),
    "top_p": ("top_p", 1.0),
    "top_k": ("top_k", 0),
    "min_p": ("min_p", 0.0),
    "repetition_penalty": ("repetition_penalty", 1.0),
    "prompt_template": ("prompt_template", None),
    "chat_template": ("chat_template", "auto"),
    "chat_template_kwargs": ("chat_template_kwargs", None),
    "timeout_s": ("sandbox_timeout_s", 5.0),
    "memory_mb": ("sandbox_memory_mb", 1024),
    "max_output_chars": ("sandbox_max_output_chars", 2000),
}


class GenerateInputError(ValueError):
    """A bad argument, input file or output folder; the message names it."""


@dataclass
class Job:
    """One attempt to generate."""

    task_id: str  # the original task id
    attempt: int  # index within the task
    task: ArcTask  # the task the model sees (an augmented copy when `augmentation` is set)
    augmentation: str | None  # None without --augment


# --------------------------------------------------------------------------------------------------------------------
# completions.jsonl


def read_completions_file(path: Path, repair: bool = True) -> list[dict[str, Any]]:
    """The attempts already in `path` (each with its `line` number); [] when it does not exist.

    The last line is dropped when it is incomplete (no newline) or not valid JSON: that is a write cut short by a
    crash. With `repair` it is also cut off the file, so that appending continues on a clean line. A bad line
    anywhere else raises GenerateInputError naming it.
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    records, seen, offset = [], set(), 0
    for n, raw in enumerate(data.splitlines(keepends=True), start=1):
        last = offset + len(raw) == len(data)
        try:
            record = json.loads(raw) if raw.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = False
        if last and (not raw.endswith(b"\n") or record is False):
            print(f"note: {path}:{n}: ignoring an incomplete last line (an interrupted run); it is regenerated",
                  file=sys.stderr)
            if repair:
                os.truncate(path, offset)
            break
        offset += len(raw)
        if record is None:
            continue
        if not isinstance(record, dict):
            raise GenerateInputError(f"{path}:{n}: not a JSON object; this file is written by `evaluate.py generate`")
        task_id, attempt = record.get("task_id"), record.get("attempt")
        if not isinstance(task_id, str) or not isinstance(record.get("completion"), str) \
                or isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise GenerateInputError(f"{path}:{n}: expected 'task_id' (string), 'attempt' (integer >= 0) and "
                                     "'completion' (string)")
        if (task_id, attempt) in seen:
            raise GenerateInputError(f"{path}:{n}: attempt {attempt} of task {task_id!r} appears twice")
        seen.add((task_id, attempt))
        records.append({**record, "line": n})
    return records


def completion_text(episode) -> str:
    """The assistant turns the episode ran, joined: replaying it runs the same code blocks in the same order."""
    texts = episode.assistant_texts
    if episode.finish_reason == "truncated":
        texts = texts[:-1]  # cut by the token cap before its end-of-turn token: the episode did not run it
    return "\n\n".join(texts)


def episode_record(job: Job, episode, prompt: list[dict[str, str]]) -> dict[str, Any]:
    record: dict[str, Any] = {"task_id": job.task_id, "attempt": job.attempt, "completion": completion_text(episode)}
    if job.augmentation is not None:
        record["augmentation"] = job.augmentation
    record.update(
        finish_reason=episode.finish_reason,
        num_turns=len(episode.assistant_texts),
        num_model_tokens=episode.num_model_tokens,
        outcome=episode.outcome.to_dict(),
        messages=prompt + episode.messages(),
    )
    return record


def attempt_augmentation(seed: int, task_id: str, attempt: int):
    """The random augmentation of one attempt; the same on every rerun (resuming regenerates the same copies)."""
    from arc_trl.data.augment import random_augmentation

    return random_augmentation(random.Random(f"{seed}:{task_id}:{attempt}"))


def plan_jobs(tasks: list[ArcTask], n: int, done: set[tuple[str, int]], augment: bool, seed: int) -> list[Job]:
    """The missing attempts, task by task (the attempts of a task share a batch: prefix caching)."""
    jobs = []
    for task in tasks:
        for attempt in range(n):
            if (task.id, attempt) in done:
                continue
            if augment:
                aug = attempt_augmentation(seed, task.id, attempt)
                jobs.append(Job(task.id, attempt, aug.apply_task(task), aug.to_string()))
            else:
                jobs.append(Job(task.id, attempt, task, None))
    return jobs


# --------------------------------------------------------------------------------------------------------------------
# settings


def _sha256(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()[:16]


def load_train_config(path: str) -> dict[str, Any]:
    """Keys of a training YAML (`scripts/train.py --config`) or of the `arc_trl_config.json` a run writes."""
    file = Path(path)
    if not file.is_file():
        raise GenerateInputError(f"--train-config {path}: no such file")
    import yaml

    try:
        if file.suffix == ".json":
            config = json.loads(file.read_text())
            if isinstance(config, dict) and {"arc", "grpo", "model"} <= set(config):
                config = {**config["model"], **config["grpo"], **config["arc"]}
        else:
            config = yaml.safe_load(file.read_text())
    except (ValueError, OSError, yaml.YAMLError) as e:
        raise GenerateInputError(f"--train-config {path}: cannot read it ({e})") from None
    if not isinstance(config, dict):
        raise GenerateInputError(f"--train-config {path}: expected a mapping of config keys")
    return config


def resolve_options(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the options left unset on the command line from --train-config, then from the built-in defaults."""
    config = load_train_config(args.train_config) if args.train_config else {}
    for option, (key, default) in CONFIGURABLE.items():
        if getattr(args, option) is None:
            value = config.get(key, default)
            setattr(args, option, default if value is None else value)
    if isinstance(args.chat_template_kwargs, str):
        try:
            args.chat_template_kwargs = json.loads(args.chat_template_kwargs)
        except json.JSONDecodeError as e:
            raise GenerateInputError(f"--chat-template-kwargs must be a JSON object ({e.msg})") from None
    if args.chat_template_kwargs is not None and not isinstance(args.chat_template_kwargs, dict):
        raise GenerateInputError(f"--chat-template-kwargs must be a JSON object, got {args.chat_template_kwargs!r}")
    if args.model is None:
        raise GenerateInputError("--model is required (or a --train-config with model_name_or_path)")
    if args.agent_mode not in AGENT_MODES:
        raise GenerateInputError(f"--agent-mode must be one of {', '.join(AGENT_MODES)}, got {args.agent_mode!r}")
    if args.agent_mode == "program":
        args.max_turns = 1
    checks = [("--n-predictions", args.n_predictions, 1), ("--max-turns", args.max_turns, 1),
              ("--max-completion-length", args.max_completion_length, 1), ("--workers", args.workers, 1)]
    checks += [("--batch-size", args.batch_size, 1)] if args.batch_size is not None else []
    checks += [("--max-tokens-per-turn", args.max_tokens_per_turn, 1)] if args.max_tokens_per_turn else []
    for flag, value, low in checks:
        if value < low:
            raise GenerateInputError(f"{flag} must be at least {low}, got {value}")
    if args.temperature < 0:
        raise GenerateInputError(f"--temperature must be >= 0 (0: greedy), got {args.temperature}")
    if not 0 < args.top_p <= 1:
        raise GenerateInputError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.adapter is not None and not (Path(args.adapter) / "adapter_config.json").is_file():
        raise GenerateInputError(f"--adapter {args.adapter}: no adapter_config.json there (expected a PEFT LoRA "
                                 "checkpoint such as outputs/run/checkpoint-20)")
    return args


def _local_or_id(path: str | None) -> str | None:
    """An existing local path made absolute (so reruns from another folder match); a hub id as is."""
    return None if path is None else str(Path(path).resolve()) if Path(path).exists() else path


def matched_settings(args: argparse.Namespace, tokenizer) -> dict[str, Any]:
    template_text = Path(args.prompt_template).read_text() if args.prompt_template else None
    return {
        "model": _local_or_id(args.model),
        "adapter": _local_or_id(args.adapter),
        "dataset": _local_or_id(args.dataset),
        "agent_mode": args.agent_mode,
        "max_turns": args.max_turns,
        "max_tokens_per_turn": args.max_tokens_per_turn,
        "max_completion_length": args.max_completion_length,
        "temperature": float(args.temperature),
        "top_p": float(args.top_p),
        "top_k": int(args.top_k),
        "min_p": float(args.min_p),
        "repetition_penalty": float(args.repetition_penalty),
        "augment": bool(args.augment),
        "prompt_template": _local_or_id(args.prompt_template),
        "prompt_template_sha256": _sha256(template_text),
        "chat_template": args.chat_template,
        "chat_template_sha256": _sha256(tokenizer.chat_template),
        "chat_template_kwargs": args.chat_template_kwargs or {},
        "sandbox_timeout_s": float(args.timeout_s),
        "sandbox_memory_mb": int(args.memory_mb),
        "sandbox_max_output_chars": int(args.max_output_chars),
    }


def check_settings(output_dir: Path, settings: dict[str, Any], has_attempts: bool) -> dict[str, Any]:
    """The recorded sampling.json (or a new one). Raises GenerateInputError when the folder holds attempts made
    with other settings."""
    path = output_dir / SAMPLING_FILE
    if not path.is_file():
        return {"dataset": settings["dataset"], "settings": settings, "runs": []}
    try:
        recorded = json.loads(path.read_text())
        old = recorded["settings"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise GenerateInputError(f"{path}: not a sampling.json written by `evaluate.py generate` ({e})") from None
    differences = [f"{key}: {old.get(key)!r} there, {settings[key]!r} now" for key in MATCHED_SETTINGS
                   if old.get(key) != settings[key]]
    if differences and has_attempts:
        raise GenerateInputError(
            f"{output_dir} holds attempts made with other settings ({'; '.join(differences)}). Attempts with "
            "different settings must not be mixed: use another --output-dir, or rerun with the recorded settings."
        )
    if differences:  # an earlier run that generated nothing: start over with the new settings
        return {"dataset": settings["dataset"], "settings": settings, "runs": []}
    return recorded


def package_versions(backend: str, adapter: bool) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    names = ["arc-trl", "torch", "transformers", "trl"] + (["peft"] if adapter else [])
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    if backend == "vllm":
        import vllm

        out["vllm"] = vllm.__version__
    return out


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------------------------------
# models and backends


def load_tokenizer(model: str, chat_template: str):
    from transformers import AutoTokenizer

    from arc_trl.chat_template import resolve_chat_template

    tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, resolve_chat_template(tokenizer, chat_template)


def eos_token_ids(model: str, tokenizer) -> list[int]:
    """End-of-turn tokens as TRL's GRPOTrainer computes them: the tokenizer's EOS plus the generation config's."""
    from transformers import GenerationConfig

    try:
        ids = GenerationConfig.from_pretrained(model).eos_token_id
    except OSError:
        ids = None
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    return ids if tokenizer.eos_token_id in ids else [tokenizer.eos_token_id, *ids]


def load_merged_model(model: str, adapter: str | None, dtype: str):
    """A transformers model, with the LoRA adapter merged into it when given."""
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
    if adapter is not None:
        from peft import PeftModel

        loaded = PeftModel.from_pretrained(loaded, adapter).merge_and_unload()
    return loaded


def merge_adapter_to(model: str, adapter: str, dtype: str, out_dir: Path, tokenizer) -> Path:
    """Write base + merged LoRA (and the tokenizer) to `out_dir`, for an engine that loads a plain checkpoint."""
    print(f"[generate] merging {adapter} into {model} -> {out_dir}", file=sys.stderr)
    load_merged_model(model, adapter, dtype).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def sampling_options(args: argparse.Namespace) -> dict[str, Any]:
    options = {"temperature": float(args.temperature), "top_p": float(args.top_p),
               "repetition_penalty": float(args.repetition_penalty)}
    if args.top_k:
        options["top_k"] = int(args.top_k)
    if args.min_p:
        options["min_p"] = float(args.min_p)
    return options


def build_generator(args, tokenizer, eos_ids: list[int], max_model_len: int, stack: contextlib.ExitStack):
    """The generation backend; its resources (engine, merged checkpoint) are released when `stack` closes."""
    sampling = sampling_options(args)
    if args.backend == "transformers":
        import torch

        from arc_trl.rollout import TransformersGenerator

        torch.manual_seed(args.seed)
        model = load_merged_model(args.model, args.adapter, args.dtype)
        model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
        if args.temperature == 0:
            sampling = {"do_sample": False}
        else:
            sampling.setdefault("top_k", 0)  # override the model's generation_config (e.g. Qwen3's top_k=20)
            sampling.setdefault("min_p", None)
        return TransformersGenerator(model, tokenizer, eos_ids, batch_size=args.batch_size, **sampling)
    try:
        from vllm import LLM
    except ImportError as e:
        raise GenerateInputError(f"--backend vllm needs vLLM ({e}); install it or use --backend transformers") from None
    from arc_trl.rollout import VLLMGenerator

    model = args.model
    if args.adapter is not None:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="arc_trl_merged_")))
        model = str(merge_adapter_to(args.model, args.adapter, args.dtype, folder, tokenizer))
    llm = LLM(
        model=model, dtype=vllm_dtype(args.model, args.dtype), max_model_len=max_model_len, seed=args.seed,
        enforce_eager=args.enforce_eager, gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size, enable_prefix_caching=True,
    )
    stack.callback(shutdown_engine, llm)
    return VLLMGenerator(llm, eos_ids, stop_token_ids=list(eos_ids), **sampling)


def vllm_dtype(model: str, dtype: str) -> str:
    """`auto` becomes the checkpoint's own dtype: vLLM's `auto` downcasts float32 checkpoints (to bfloat16 on CPU,
    float16 on GPU), which would sample from another model than the one trained in float32."""
    if dtype != "auto":
        return dtype
    from transformers import AutoConfig

    saved = getattr(AutoConfig.from_pretrained(model), "dtype", None)
    name = str(saved).removeprefix("torch.") if saved is not None else "auto"
    return name if name in ("float32", "bfloat16", "float16") else "auto"


def shutdown_engine(llm) -> None:
    """Stop a vLLM engine now rather than at interpreter exit (frees its memory before scoring)."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()


# --------------------------------------------------------------------------------------------------------------------
# generation and scoring


def generate_attempts(jobs: list[Job], prompts: list[list[dict]], generator, tokenizer, pool, settings,
                      template_kwargs: dict, batch_size: int, write: Callable[[dict[str, Any]], None],
                      stats: dict[str, Any], progress: bool = True) -> None:
    """Play every job's episode (`batch_size` episodes at a time) and `write` each record as soon as it ends.

    `stats` (attempts, model_tokens, seconds, model_tokens_per_s) is kept up to date, also when this raises."""
    from tqdm import tqdm

    from arc_trl.rollout import run_episodes

    stats.update(attempts=0, model_tokens=0)
    start = time.perf_counter()
    try:
        with tqdm(total=len(jobs), desc="generating", unit="attempt", disable=not progress, file=sys.stderr) as bar:
            for first in range(0, len(jobs), batch_size):
                batch, batch_prompts = jobs[first : first + batch_size], prompts[first : first + batch_size]

                def on_finished(episodes, batch=batch, batch_prompts=batch_prompts):
                    for ep in episodes:
                        write(episode_record(batch[ep.index], ep, batch_prompts[ep.index]))
                        stats["attempts"] += 1
                        stats["model_tokens"] += ep.num_model_tokens
                    bar.update(len(episodes))

                run_episodes([j.task for j in batch], batch_prompts, generator, tokenizer, pool, settings,
                             template_kwargs, on_finished=on_finished)
    finally:
        seconds = time.perf_counter() - start
        stats["seconds"] = round(seconds, 3)
        stats["model_tokens_per_s"] = round(stats["model_tokens"] / seconds, 1) if seconds > 0 else None


def score_folder(output_dir: Path, tasks: list[ArcTask], n_predictions: int, dataset: str, agent_mode: str,
                 workers: int, config, progress: bool = True) -> dict[str, Any]:
    """Score the first `n_predictions` attempts of each task (replayed in the sandbox, as `evaluate.py score`)."""
    from arc_trl.eval.passk import write_pass_at_k
    from arc_trl.eval.score import score_completions, write_outputs
    from arc_trl.eval.tables import write_metrics_table

    start = time.perf_counter()
    path = output_dir / COMPLETIONS_FILE
    order = {task.id: i for i, task in enumerate(tasks)}
    records = [r for r in read_completions_file(path) if r["task_id"] in order and r["attempt"] < n_predictions]
    if not records:
        raise GenerateInputError(f"{path}: no attempt to score")
    records.sort(key=lambda r: (order[r["task_id"]], r["attempt"]))
    metrics, rows = score_completions(tasks, records, workers, config, mode=agent_mode, where=str(path),
                                      progress=progress)
    metrics = {"dataset": dataset, "completions": str(path), **metrics,
               "seconds": round(time.perf_counter() - start, 3)}
    write_outputs(output_dir, metrics, rows)
    write_pass_at_k(output_dir)
    write_metrics_table(output_dir, echo=True)
    return metrics


def select_tasks(args: argparse.Namespace) -> list[ArcTask]:
    from arc_trl.data.loaders import load_tasks

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

    @property
    def completions(self) -> Path:
        return self.output_dir / COMPLETIONS_FILE


def prepare(args: argparse.Namespace) -> Plan:
    """Resolve the options, load tasks and tokenizer, check the folder, list the missing attempts.

    Raises GenerateInputError."""
    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import load_template, render_messages
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
                                       max_output_chars=args.max_output_chars)
        template = load_template(args.prompt_template, args.agent_mode)
    except (ValueError, OSError) as e:
        raise GenerateInputError(str(e)) from None
    tasks = select_tasks(args)
    try:
        tokenizer, template_choice = load_tokenizer(args.model, args.chat_template)
    except (OSError, ValueError) as e:
        raise GenerateInputError(f"cannot load the tokenizer of {args.model!r}: {e}") from None
    template_kwargs = args.chat_template_kwargs or {}
    existing = read_completions_file(output_dir / COMPLETIONS_FILE)
    sampling = check_settings(output_dir, matched_settings(args, tokenizer), has_attempts=bool(existing))
    if args.max_prompt_tokens:
        def length(task: ArcTask) -> int:
            return len(prompt_ids(tokenizer, render_messages(task, args.agent_mode, template), **template_kwargs))

        kept = [t for t in tasks if length(t) <= args.max_prompt_tokens]
        if not kept:
            raise GenerateInputError(f"every task's prompt is longer than --max-prompt-tokens {args.max_prompt_tokens}")
        if len(kept) < len(tasks):
            print(f"[generate] {len(tasks) - len(kept)} task(s) dropped: prompt longer than {args.max_prompt_tokens} "
                  "tokens", file=sys.stderr)
        tasks = kept
    tasks = tasks[: args.max_tasks] if args.max_tasks else tasks  # after the length filter, as in training
    done = {(r["task_id"], r["attempt"]) for r in existing}
    jobs = plan_jobs(tasks, args.n_predictions, done, args.augment, args.seed)
    return Plan(args, output_dir, tasks, jobs, tokenizer, template, template_choice, template_kwargs, sandbox_config,
                sampling)


def generate(plan: Plan) -> dict[str, Any]:
    """Generate the plan's missing attempts into completions.jsonl; returns this run's entry of sampling.json."""
    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import render_messages
    from arc_trl.rollout import RolloutSettings
    from arc_trl.sandbox import SandboxPool

    args, tokenizer = plan.args, plan.tokenizer
    prompts = [render_messages(job.task, args.agent_mode, plan.template) for job in plan.jobs]
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
    rollout = RolloutSettings(args.agent_mode, args.max_turns, args.max_tokens_per_turn, args.max_completion_length)
    with contextlib.ExitStack() as stack:
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


def run_generate(args: argparse.Namespace) -> int:
    """Run `generate`; returns the exit code (0 done, 2 bad arguments, inputs or output folder, 130 interrupted)."""
    started = time.perf_counter()
    try:
        plan = prepare(args)
        args = plan.args
        total = len(plan.tasks) * args.n_predictions
        print(f"[generate] {len(plan.tasks)} tasks x {args.n_predictions} attempts: {len(plan.jobs)} to generate, "
              f"{total - len(plan.jobs)} already in {plan.completions}; chat template: {plan.template_choice}",
              file=sys.stderr)
        if plan.jobs:
            run = generate(plan)
            print(f"[generate] {run['attempts']} attempts, {run['model_tokens']} model tokens in {run['seconds']} s "
                  f"({run['model_tokens_per_s']} tokens/s)", file=sys.stderr)
        elif not (plan.output_dir / SAMPLING_FILE).is_file():
            write_json(plan.output_dir / SAMPLING_FILE, plan.sampling)
        if not args.no_score:
            score_folder(plan.output_dir, plan.tasks, args.n_predictions, args.dataset, args.agent_mode, args.workers,
                         plan.sandbox_config, progress=not args.no_progress)
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
    p("--model", default=None, help="model folder or hub id (the base model when --adapter is given)")
    p("--adapter", default=None, help="PEFT LoRA checkpoint to apply, e.g. outputs/run/checkpoint-20")
    p("--dataset", required=True, help="dataset name (arc-agi-1/eval), Kaggle challenges JSON, or task folder")
    p("--solutions", default=None, help="Kaggle solutions file, when not beside the challenges")
    p("--output-dir", required=True, help="folder for completions.jsonl, sampling.json and the scores")
    p("--n-predictions", type=int, default=8, help="attempts per task (default 8)")
    p("--train-config", default=None,
      help="training YAML or a run's arc_trl_config.json: default agent, sampling and sandbox settings")
    p("--agent-mode", choices=AGENT_MODES, default=None, help="repl (default) or program")
    p("--max-turns", type=int, default=None, help="assistant turns per episode (default 4)")
    p("--max-tokens-per-turn", type=int, default=None, help="token cap per turn (default: the episode budget)")
    p("--max-completion-length", type=int, default=None,
      help="token budget of an episode, model + environment tokens (default 1024)")
    p("--max-prompt-tokens", type=int, default=None, help="skip tasks whose prompt is longer than this")
    p("--temperature", type=float, default=None, help="sampling temperature (default 1.0; 0 = greedy)")
    p("--top-p", type=float, default=None, help="default 1.0")
    p("--top-k", type=int, default=None, help="default 0 (off)")
    p("--min-p", type=float, default=None, help="default 0 (off)")
    p("--repetition-penalty", type=float, default=None, help="default 1.0")
    p("--prompt-template", default=None, help="custom prompt template (YAML), as in training")
    p("--chat-template", default=None, help="auto (default) | chatml | path to a .jinja file, as in training")
    p("--chat-template-kwargs", default=None, help='JSON object, e.g. \'{"enable_thinking": false}\'')
    p("--augment", action="store_true",
      help="each attempt sees a random dihedral + colour augmentation of its task (fixed per seed/task/attempt)")
    p("--backend", choices=BACKENDS, default="vllm", help="vllm (default) or transformers")
    p("--batch-size", type=int, default=None, help="episodes generated together (default: vllm 128, transformers 8)")
    p("--max-tasks", type=int, default=None, help="only the first K tasks (sorted by id, after --max-prompt-tokens)")
    p("--task-ids", nargs="+", default=None, help="only these task ids")
    p("--seed", type=int, default=0, help="sampling seed, also of the augmentations (default 0)")
    p("--workers", type=int, default=min(4, os.cpu_count() or 1), help="sandbox processes (default min(4, CPUs))")
    p("--timeout-s", type=float, default=None, help="wall-clock limit per code run (default 5)")
    p("--memory-mb", type=int, default=None, help="address-space limit of a sandbox process (default 1024)")
    p("--max-output-chars", type=int, default=None, help="stdout/stderr kept per code run (default 2000)")
    p("--dtype", default=None, help="model dtype: auto (default), float32, bfloat16, ...")
    p("--max-model-len", type=int, default=None, help="vLLM context (default: longest prompt + episode budget)")
    p("--gpu-memory-utilization", type=float, default=0.9, help="vLLM (default 0.9)")
    p("--tensor-parallel-size", type=int, default=1, help="vLLM (default 1)")
    p("--enforce-eager", action="store_true", help="vLLM: no CUDA graphs / compilation (faster start)")
    p("--no-score", action="store_true", help="only generate")
    p("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_generate_arguments(argparse.ArgumentParser(description="Sample attempts with the training agent "
                                                                        "and score them (see the module docstring)."))
    return run_generate(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
