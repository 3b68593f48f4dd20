"""Whether a `model_name_or_path` names a local folder that is missing, said in one line before anything loads.

`from_pretrained` takes a value that is not a folder for a Hugging Face Hub id: a missing absolute path failed with
`OSError: Repo id must be in the form 'repo_name' ...` and a missing relative one (`outputs/tiny-sft`, which reads as
`namespace/name`) with a minute of hub retries and a long traceback. A value is taken as a local path when it cannot
be a hub id (absolute, `./`, `../`, `~`, more than one `/`), when its first folder exists here, or when a config of
this checkout writes it (its `output_dir`): then it must be a model folder, and the error names the command that
makes it. Anything else is left to the hub.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_MODEL_DEFAULT = "outputs/tiny-model"  # arc-trl build-tiny-model's default --out
DEMO_MODEL = "outputs/demo/model"  # what `make demo` builds first (arc-trl build-tiny-model --out outputs/demo/model)


def makers(value: str, root: Path = REPO_ROOT, depth: int = 3) -> list[str]:
    """The commands, in order, that make the folder `value` from this checkout's configs (those whose `output_dir` it
    is, and what their own `model_name_or_path` needs first); empty when none does."""
    import yaml

    if value.rstrip("/") == TINY_MODEL_DEFAULT:
        return ["arc-trl build-tiny-model"]
    if value.rstrip("/") == DEMO_MODEL:
        return [f"arc-trl build-tiny-model --out {DEMO_MODEL}"]
    for config in sorted((root / "configs").rglob("*.yaml")) if depth > 0 else []:
        try:
            keys = yaml.safe_load(config.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(keys, dict) and str(keys.get("output_dir", "")).rstrip("/") == value.rstrip("/"):
            command = "sft" if config.name.startswith("sft") else "train"
            before = makers(str(keys.get("model_name_or_path", "")), root, depth - 1)
            return [*before, f"arc-trl {command} --config {config.relative_to(root)}"]
    return []


def is_local_path(value: str, root: Path = REPO_ROOT) -> bool:
    """True when `value` can only be a local folder (see the module docstring)."""
    if value.startswith(("/", "./", "../", "~")) or value.count("/") > 1:
        return True
    first = value.split("/", 1)[0]
    return ("/" in value and Path(first).is_dir()) or bool(makers(value, root))


def missing_model_folder(value: str, key: str = "model_name_or_path") -> str | None:
    """A one-line reason when `value` is a local path without a model there (None: a model folder, or a hub id)."""
    path = Path(value).expanduser()
    if path.is_dir():
        return None if (path / "config.json").is_file() else (
            f"{key}: {value} is a folder without config.json, not a model folder")
    if not is_local_path(value):
        return None
    steps = makers(value)
    how = (f"make it with `{' && '.join(steps)}`" if steps else
           "make it first (arc-trl build-tiny-model, arc-trl sft, arc-trl import-gguf) or give a hub id such as "
           "Qwen/Qwen3-0.6B")
    return f"{key}: no model folder at {value} ({path.resolve()}); {how}"
