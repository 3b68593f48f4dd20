"""Settings of `arc-trl evaluate generate`: its options, and `sampling.json`, the record of how attempts were made.

Options left unset on the command line come from a training config (`--train-config`, `load_train_config`), then from
the built-in defaults (`CONFIGURABLE`), and are checked (`resolve_options`). `MATCHED_SETTINGS` are the values that
define an attempt: `matched_settings` computes them, `check_settings` compares them with those recorded in a folder's
`sampling.json` and refuses to mix attempts made with different values. `GenerateInputError` is the error every
part of `generate` raises for a bad argument, input file or output folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from arc_trl.config import defaults
from arc_trl.config.choices import AGENT_MODES

SAMPLING_FILE = "sampling.json"
# What defines an attempt. Attempts made with different values never share a folder.
MATCHED_SETTINGS = (
    "model", "adapter", "dataset", "agent_mode", "max_turns", "max_tokens_per_turn", "max_completion_length",
    "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "augment", "prompt_template",
    "prompt_template_sha256", "chat_template", "chat_template_sha256", "chat_template_kwargs", "sandbox_timeout_s",
    "sandbox_memory_mb", "sandbox_max_output_chars", "privileged", "check_transform",
)
# option -> (training config key, built-in default: the training one, arc_trl.config.defaults). Precedence: command
# line, then --train-config, then default.
CONFIGURABLE: dict[str, tuple[str, Any]] = {
    "model": ("model_name_or_path", None),
    "dtype": ("dtype", "auto"),
    "agent_mode": ("agent_mode", defaults.AGENT_MODE),
    "max_turns": ("max_turns", defaults.MAX_TURNS),
    "max_tokens_per_turn": ("max_tokens_per_turn", defaults.MAX_TOKENS_PER_TURN),
    "max_completion_length": ("max_completion_length", defaults.MAX_COMPLETION_LENGTH),
    "max_prompt_tokens": ("max_prompt_tokens", None),
    "rollout_scheduling": ("rollout_scheduling", defaults.ROLLOUT_SCHEDULING),
    "temperature": ("temperature", defaults.TEMPERATURE),
    "top_p": ("top_p", defaults.TOP_P),
    "top_k": ("top_k", defaults.TOP_K),
    "min_p": ("min_p", defaults.MIN_P),
    "repetition_penalty": ("repetition_penalty", defaults.REPETITION_PENALTY),
    "prompt_template": ("prompt_template", None),
    "chat_template": ("chat_template", defaults.CHAT_TEMPLATE),
    "chat_template_kwargs": ("chat_template_kwargs", None),
    "timeout_s": ("sandbox_timeout_s", defaults.SANDBOX_TIMEOUT_S),
    "memory_mb": ("sandbox_memory_mb", defaults.SANDBOX_MEMORY_MB),
    "max_output_chars": ("sandbox_max_output_chars", defaults.SANDBOX_MAX_OUTPUT_CHARS),
    "check_transform": ("check_transform", False),
}


class GenerateInputError(ValueError):
    """A bad argument, input file or output folder; the message names it."""


def _sha256(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()[:16]


def load_train_config(path: str) -> dict[str, Any]:
    """Keys of a training YAML (`arc-trl train --config`) or of the `arc_trl_config.json` a run writes."""
    file = Path(path)
    if not file.is_file():
        raise GenerateInputError(f"--train-config {path}: no such file")
    import yaml

    try:
        if file.suffix == ".json":
            config = json.loads(file.read_text())
            if isinstance(config, dict) and {"arc", "grpo", "model"} <= set(config):  # "script": since issue 44
                config = {**config["model"], **config["grpo"], **config.get("script", {}), **config["arc"]}
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
        # None for the student prompt, so that folders written before the option existed still match
        "privileged": None if getattr(args, "privileged", "none") in (None, "none") else args.privileged,
        "check_transform": True if args.check_transform else None,  # None when off: older folders match
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
        raise GenerateInputError(f"{path}: not a sampling.json written by `arc-trl evaluate generate` ({e})") from None
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
