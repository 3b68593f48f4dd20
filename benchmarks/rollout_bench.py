"""Rollout throughput: colocated vLLM vs transformers `generate` on the same model and batch (goal: >= 5x).

    python benchmarks/rollout_bench.py [--batch 32 --new-tokens 128 --layers 4 --hidden 256]

Both sides generate exactly `--new-tokens` tokens per sequence (EOS ignored) from the same real ARC prompts, with the
project's generators (`arc_trl.rollout.VLLMGenerator` / `TransformersGenerator`); model load time is excluded.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="keep ARC prompts up to this length")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from vllm import LLM

    from arc_trl.rollout import TransformersGenerator, VLLMGenerator
    from common import arc_prompts, build_bench_model

    model_dir = build_bench_model(args.layers, args.hidden, "rollout_bench_")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = arc_prompts(tokenizer, args.batch, args.prompt_tokens)
    total_new = args.batch * args.new_tokens
    mean_prompt = sum(map(len, prompts)) / len(prompts)
    print(f"model: Qwen3 {args.layers} layers x {args.hidden} hidden ({sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters()) / 1e6:.1f} M params); "
          f"batch {len(prompts)} prompts (mean {mean_prompt:.0f} tokens) x {args.new_tokens} new tokens; "
          f"torch threads {torch.get_num_threads()}")

    llm = LLM(model=str(model_dir), dtype="float32", max_model_len=args.prompt_tokens + args.new_tokens + 8,
              max_num_seqs=args.batch, seed=0)
    vgen = VLLMGenerator(llm, [], ignore_eos=True)
    vgen.generate(prompts[:2], 8)  # warm-up
    start = time.perf_counter()
    ids, _ = vgen.generate(prompts, args.new_tokens)
    vllm_s = time.perf_counter() - start
    assert sum(map(len, ids)) == total_new, sum(map(len, ids))

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    hgen = TransformersGenerator(model, tokenizer, [tokenizer.eos_token_id], batch_size=args.batch, min_new_tokens=args.new_tokens)
    hgen.generate(prompts[:2], 8)  # warm-up
    start = time.perf_counter()
    ids, _ = hgen.generate(prompts, args.new_tokens)
    hf_s = time.perf_counter() - start
    assert sum(map(len, ids)) == total_new, sum(map(len, ids))

    print(f"vLLM (colocated, CPU)     : {vllm_s:7.2f} s  {total_new / vllm_s:9.1f} tokens/s")
    print(f"transformers generate     : {hf_s:7.2f} s  {total_new / hf_s:9.1f} tokens/s")
    print(f"ratio vLLM / transformers : {hf_s / vllm_s:.1f}x  (goal >= 5x)")


if __name__ == "__main__":
    main()
