"""Optional unsloth path (`use_unsloth: true`): single-GPU LoRA training with unsloth's patched model.

What unsloth contributes: `FastLanguageModel` loading (its patched attention/MLP/RoPE kernels), its LoRA layers and
its ("unsloth") gradient checkpointing. What stays TRL's: the GRPO loss, sampling and weight sync. unsloth is imported
after TRL, so `ArcGRPOTrainer` keeps subclassing TRL's own `GRPOTrainer` (unsloth's generated `UnslothGRPOTrainer`
would replace the loss that our hooks feed: env_mask/tool_mask, per-token teacher advantages). Generation goes
through TRL: transformers, or colocated vLLM whose weights TRL syncs from the merged adapter. unsloth's own vLLM
engine (`fast_inference=True`) is only driven by its own trainer, so it is not used; `trl vllm-serve` weight sync does
not work with unsloth models (seen in the TRL + unsloth research log), so `vllm_mode: server` is rejected.

Every check that needs no GPU runs first (`check_unsloth_config`, then the installed versions), so a wrong config or
a wrong install fails at start-up with the fix in the message, not deep inside model loading.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from packaging.version import InvalidVersion, Version

# The versions that go together (unsloth 2026.10.x's own caps: trl<=1.15.0, transformers<=5.17.0, datasets<5).
# pyproject.toml's `unsloth` extra installs exactly this set.
SUPPORTED_STACK = "unsloth>=2026.10 with trl==1.15.0, transformers>=5.16.1,<=5.17.0, datasets>=4.7,<5"
INSTALL_HINT = "pip install -e '.[unsloth]' (see README.md, Install)"
SKIP_VERSION_CHECK_ENV = "ARC_TRL_UNSLOTH_SKIP_VERSION_CHECK"

_RULES: dict[str, tuple[Callable[[Version], bool], str]] = {
    "unsloth": (lambda v: v >= Version("2026.10"), ">=2026.10"),
    "unsloth_zoo": (lambda v: v >= Version("2026.10"), ">=2026.10"),
    "trl": (lambda v: v.release[:2] == (1, 15), "==1.15.*"),
    "transformers": (lambda v: Version("5.16.1") <= v <= Version("5.17.0"), ">=5.16.1,<=5.17.0"),
    "datasets": (lambda v: Version("4.7") <= v < Version("5"), ">=4.7,<5"),
}


class UnslothUnavailableError(RuntimeError):
    """unsloth cannot run here: no CUDA GPU, not installed, or installed with versions that do not go together."""


class UnslothConfigError(ValueError):
    """The run's config asks for something the unsloth path does not support."""


def check_unsloth_config(args, model_args, world_size: int | None = None) -> None:
    """Reject configs unsloth cannot run, naming the field to change. Needs no GPU and no unsloth."""
    if world_size is None:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
    problems = []
    if not model_args.use_peft:
        problems.append("use_peft: true is needed (unsloth trains LoRA adapters; lora_r, lora_alpha, "
                        "lora_target_modules apply)")
    if args.deepspeed or os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() in ("1", "true"):
        problems.append("DeepSpeed is not supported (unsloth is single-GPU): drop `deepspeed` / the ZeRO accelerate "
                        "config")
    if args.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "").lower() in ("1", "true"):
        problems.append("FSDP is not supported (unsloth is single-GPU): drop `fsdp` / the FSDP accelerate config")
    if world_size > 1:
        problems.append(f"{world_size} training processes (WORLD_SIZE={world_size}): unsloth trains on one GPU; "
                        "launch one process (accelerate_configs/single_gpu.yaml)")
    if args.use_vllm and args.vllm_mode == "server":
        problems.append("vllm_mode: server is not supported (weights would not sync to `trl vllm-serve`): use "
                        "vllm_mode: colocate or use_vllm: false")
    if problems:
        raise UnslothConfigError("use_unsloth: true: " + "; ".join(problems))


def installed_versions(names=tuple(_RULES)) -> dict[str, str | None]:
    """Installed distribution versions (None when absent), read from package metadata without importing them."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def version_problems(versions: Mapping[str, str | None]) -> list[str]:
    """`name installed-version (needs spec)` for each package outside the supported set."""
    problems = []
    for name, (ok, spec) in _RULES.items():
        installed = versions.get(name)
        if installed is None:
            problems.append(f"{name} not installed (needs {spec})")
            continue
        try:
            good = ok(Version(installed))
        except InvalidVersion:
            good = False
        if not good:
            problems.append(f"{name} {installed} (needs {spec})")
    return problems


def check_unsloth_available(versions: Mapping[str, str | None] | None = None, cuda: bool | None = None) -> None:
    """unsloth installed, with versions that go together, and a CUDA GPU visible; else a clear error."""
    versions = installed_versions() if versions is None else versions
    if versions.get("unsloth") is None:
        raise UnslothUnavailableError(f"use_unsloth: true but the 'unsloth' package is not installed: {INSTALL_HINT}")
    problems = version_problems(versions)
    if problems and os.environ.get(SKIP_VERSION_CHECK_ENV) != "1":
        raise UnslothUnavailableError(
            f"use_unsloth: true but the installed versions do not go together: {'; '.join(problems)}. "
            f"Supported: {SUPPORTED_STACK}. Install them with {INSTALL_HINT}, or set {SKIP_VERSION_CHECK_ENV}=1 to "
            "try this combination anyway."
        )
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    if not cuda:
        raise UnslothUnavailableError("use_unsloth: true needs a CUDA GPU; none is visible (set use_unsloth: false)")


def _unsloth_dtype(name: str | None):
    import torch

    return {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(name or "auto")  # None: unsloth picks


def load_unsloth_model(model_args, args, tokenizer, max_seq_length: int | None = None):
    """Return (model with LoRA adapters, tokenizer, peft_config=None) loaded through unsloth.

    The tokenizer passed in is returned unchanged (ours has the resolved chat template and left padding)."""
    check_unsloth_config(args, model_args)
    check_unsloth_available()
    from unsloth import FastLanguageModel  # noqa: I001 (patches transformers/peft/torch checkpointing on import)

    checkpointing = "unsloth" if args.gradient_checkpointing else False
    model, _ = FastLanguageModel.from_pretrained(
        model_name=model_args.model_name_or_path,
        max_seq_length=max_seq_length or args.vllm_max_model_length or 8192,
        load_in_4bit=bool(model_args.load_in_4bit),
        dtype=_unsloth_dtype(model_args.dtype),
        fast_inference=False,  # generation goes through TRL (module docstring)
        use_gradient_checkpointing=checkpointing,
    )
    model = FastLanguageModel.get_peft_model(
        model,
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=model_args.lora_target_modules or [
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"
        ],
        use_rslora=bool(model_args.use_rslora),
        use_gradient_checkpointing=checkpointing,
        random_state=args.seed,
    )
    return model, tokenizer, None
