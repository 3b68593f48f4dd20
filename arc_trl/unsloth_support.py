"""Optional unsloth path (`use_unsloth: true`): single-GPU LoRA training with unsloth's patched model.

unsloth needs a CUDA GPU and its own package; both are checked up front with a clear error instead of failing deep
inside model loading. Generation still goes through TRL (transformers or vLLM), as in the seeds' experiments, which
found unsloth incompatible with `trl vllm-serve` weight sync: use `vllm_mode: colocate` or no vLLM with it.
"""

from __future__ import annotations


class UnslothUnavailableError(RuntimeError):
    pass


def check_unsloth_available() -> None:
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        raise UnslothUnavailableError("use_unsloth: true needs a CUDA GPU; none is visible (set use_unsloth: false)")
    if importlib.util.find_spec("unsloth") is None:
        raise UnslothUnavailableError(
            "use_unsloth: true but the 'unsloth' package is not installed: pip install 'arc-trl[unsloth]'"
        )


def load_unsloth_model(model_args, args, tokenizer):
    """Return (model with LoRA adapters, tokenizer, peft_config=None) loaded through unsloth."""
    check_unsloth_available()
    if args.use_vllm and args.vllm_mode == "server":
        raise UnslothUnavailableError("use_unsloth does not support vllm_mode: server (weights would not sync)")
    from unsloth import FastLanguageModel  # noqa: I001 (unsloth must be imported before transformers patches)

    max_len = (args.vllm_max_model_length or 0) or 8192
    model, _ = FastLanguageModel.from_pretrained(
        model_name=model_args.model_name_or_path,
        max_seq_length=max_len,
        load_in_4bit=bool(model_args.load_in_4bit),
        dtype=None,
    )
    model = FastLanguageModel.get_peft_model(
        model,
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=model_args.lora_target_modules or [
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"
        ],
        use_gradient_checkpointing="unsloth" if args.gradient_checkpointing else False,
        random_state=args.seed,
    )
    return model, tokenizer, None
