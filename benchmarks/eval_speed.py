"""`arc-trl evaluate generate` at the engine's speed? Its generated tokens/s against vLLM's own `LLM.generate` on the
same prompts, sampling settings and token cap, on one engine.

    python benchmarks/eval_speed.py --model models/qwen05 --out speed.json [--tasks 100 --n 8 --max-tokens 1024]

The prompts are the program-mode prompts (configs/prompts/coder-program.yaml, one turn: the only episodes plain
`generate` can play too) of the first `--tasks` of the 100 validation tasks of ARC-AGI-1 training
(lab/arc_experiments/coder/plan.py), each `--n` times. Arms, in this order, each after `reset_prefix_cache` (no arm
reuses another's cache; within an arm the n copies of a prompt share it):

- `vllm_generate`: every request in one `LLM.generate` call (the ceiling);
- `lockstep_128`: evaluate's episode loop as it was by default (batches of 128 episodes, each batch generated in one
  call, then its code run in the sandbox);
- `per_episode_512`: 512 episodes in play, a new one started as one ends (what the experiment runs with).

Printed and written: generated tokens, seconds (engine start and a warm-up call excluded), tokens/s, and each arm's ratio to
`vllm_generate` (target >= 0.5). Sampling: temperature 1, top_p 1 (the training defaults), the same for all arms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--max-model-len", type=int, default=24576)
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--arms", default="vllm_generate,lockstep_128,per_episode_512")
    parser.add_argument("--enforce-eager", action="store_true")
    args = parser.parse_args(argv)

    from vllm import LLM, SamplingParams

    from arc_experiments.coder.plan import validation_ids
    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import load_template, render_messages
    from arc_trl.eval.attempts_file import Job
    from arc_trl.eval.generate import generate_attempts
    from arc_trl.eval.generation_backends import eos_token_ids, load_tokenizer
    from arc_trl.rollout import RolloutSettings, VLLMGenerator
    from arc_trl.sandbox import SandboxConfig, SandboxPool
    from arc_trl.tasks import load_tasks

    tokenizer, _ = load_tokenizer(args.model, "auto")
    template = load_template(ROOT / "configs" / "prompts" / "coder-program.yaml", "program")
    train = load_tasks("arc-agi-1/train")
    by_id = {t.id: t for t in train}
    tasks = [by_id[i] for i in validation_ids(list(by_id))][: args.tasks]
    messages = [render_messages(t, "program", template) for t in tasks for _ in range(args.n)]
    jobs = [Job(t.id, k, t, None) for t in tasks for k in range(args.n)]
    ids = [prompt_ids(tokenizer, m) for m in messages]
    eos = eos_token_ids(args.model, tokenizer)
    llm = LLM(model=args.model, dtype="bfloat16", max_model_len=args.max_model_len, seed=0,
              enable_prefix_caching=True, enforce_eager=args.enforce_eager, gpu_memory_utilization=0.85)
    sampling = {"temperature": 1.0, "top_p": 1.0}
    results: dict[str, dict] = {}

    def record(name: str, tokens: int, seconds: float) -> None:
        results[name] = {"generated_tokens": tokens, "seconds": round(seconds, 2),
                         "tokens_per_s": round(tokens / seconds, 1)}
        print(f"{name}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.0f} tokens/s", flush=True)

    from vllm.inputs import TokensPrompt

    llm.generate([TokensPrompt(prompt_token_ids=p) for p in ids[:16]], SamplingParams(max_tokens=16), use_tqdm=False)
    for arm in args.arms.split(","):  # after a warm-up call: no arm pays the engine's first steps
        llm.reset_prefix_cache()
        if arm == "vllm_generate":
            params = SamplingParams(max_tokens=args.max_tokens, stop_token_ids=eos, **sampling)
            start = time.perf_counter()
            outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in ids], params, use_tqdm=False)
            record(arm, sum(len(o.outputs[0].token_ids) for o in outputs), time.perf_counter() - start)
            continue
        scheduling, batch = arm.rsplit("_", 1)
        settings = RolloutSettings("program", 1, args.max_tokens, args.max_tokens, scheduling=scheduling)
        generator = VLLMGenerator(llm, eos, stop_token_ids=list(eos), **sampling)
        stats: dict = {}
        with SandboxPool(num_workers=args.workers, config=SandboxConfig()) as pool:
            generate_attempts(jobs, messages, generator, tokenizer, pool, settings, {}, int(batch), lambda r: None,
                              stats, progress=False)
        record(arm, stats["model_tokens"], stats["seconds"])
    if "vllm_generate" in results:
        ceiling = results["vllm_generate"]["tokens_per_s"]
        for figures in results.values():
            figures["ratio_to_vllm_generate"] = round(figures["tokens_per_s"] / ceiling, 3)
    summary = {"model": args.model, "prompts": len(ids), "tasks": len(tasks), "n": args.n,
               "max_tokens": args.max_tokens, "mean_prompt_tokens": round(sum(map(len, ids)) / len(ids), 1),
               "arms": results, "command": " ".join(sys.argv)}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
