"""Generation backends of `arc-trl evaluate generate`: the tokenizer, the model and the generator that samples episodes.

`build_generator` makes a `VLLMGenerator` (a standalone vLLM engine, with a LoRA adapter merged into a temporary
checkpoint first) or a `TransformersGenerator` (transformers `generate`, adapter merged in memory), with the sampling
options and end-of-turn tokens (`eos_token_ids`) that TRL's GRPOTrainer uses in training. Its resources are tied to
an `ExitStack`, so the engine is shut down (`shutdown_engine`) and the merged checkpoint removed when it closes.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any

from arc_trl.eval.generation_settings import GenerateInputError

BACKENDS = ("vllm", "transformers")


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
        return TransformersGenerator(model, tokenizer, eos_ids, batch_size=args.batch_size, **sampling)
    try:
        from vllm import LLM
    except ImportError as e:
        raise GenerateInputError(f"--backend vllm needs vLLM ({e}); install it or use --backend transformers") from None
    from arc_trl.eval.model_alias import stable_model_path
    from arc_trl.rollout import VLLMGenerator

    model = args.model
    if args.adapter is not None:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="arc_trl_merged_")))
        model = str(merge_adapter_to(args.model, args.adapter, args.dtype, folder, tokenizer))
    model = stable_model_path(model, stack)  # one path per architecture: vLLM's compile cache is reused
    llm = LLM(
        model=model, dtype=vllm_dtype(args.model, args.dtype), max_model_len=max_model_len, seed=args.seed,
        enforce_eager=args.enforce_eager, gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size, enable_prefix_caching=True,
        **engine_memory_kwargs(getattr(args, "kv_cache_memory_gib", None)),
    )
    stack.callback(shutdown_engine, llm)
    return VLLMGenerator(llm, eos_ids, stop_token_ids=list(eos_ids), **sampling)


def engine_memory_kwargs(kv_cache_memory_gib: float | None) -> dict[str, int]:
    """`--kv-cache-memory-gib`: the engine's KV cache fixed in GiB (vLLM's kv_cache_memory_bytes) instead of sized by
    its start-up memory profile, which fails when another process on the GPU frees memory meanwhile."""
    from arc_trl.integrations.colocated_engine import kv_cache_memory_kwargs

    try:
        return kv_cache_memory_kwargs(kv_cache_memory_gib)
    except ValueError:
        raise GenerateInputError(f"--kv-cache-memory-gib must be > 0, got {kv_cache_memory_gib}") from None


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
