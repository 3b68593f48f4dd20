"""Rollout scheduling: lock-step vs per-episode on the same multi-turn episodes, and the continuous-batch floor.

    python benchmarks/scheduling_bench.py [--episodes 32 --max-turns 4 --tokens-per-turn 128 --mean-turn-tokens 32]
    python benchmarks/scheduling_bench.py --model /path/to/model --mean-turn-tokens 0 --gpu-memory-utilization 0.5 \
        --out results.json                                  # a real policy (its own turn lengths), CUDA or CPU vLLM

Plays `--episodes` REPL episodes (one per ARC-AGI-1 training task, real sandbox) with `arc_trl.rollout.run_episodes`
twice on one vLLM engine: `scheduling=lockstep` (every turn, all active episodes generate in one call, then all run
their code) and `scheduling=per_episode` (each episode advances on its own in the engine's continuous batch). The
floor is the time the engine needs to generate the same number of model tokens per episode (the per-episode run's)
in one continuous batch (`ignore_eos`), without turns, environment replies or code runs.

Default policy: a random-init Qwen3 (`--layers`, `--hidden`) whose end-of-turn token gets a logit bias so that turn
lengths are about geometric with mean `--mean-turn-tokens` (cut at `--tokens-per-turn`, as RL turns are: most short,
a few long). It writes no code, so every turn gets the sandbox's "no code" reply and goes on to the next turn. With
`--model` and `--mean-turn-tokens 0` the model's own turns are played (e.g. an SFT'd policy that writes code).

With CUDA vLLM both modes sample with a per-request seed derived from the request's tokens, so a given context is
continued the same way in both: the two runs play the same episodes (up to numerical differences between batch
compositions). CPU vLLM cannot seed single requests ("CPU Generator does not use offset"): there the two runs play
different samples of the same policy; the model-token totals are printed to compare the workloads, and tokens/s is
the fairer figure. Wall times are the median of `--repeats` runs; engine start is excluded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")


def context_seed(token_ids: list[int]) -> int:
    """A sampling seed that is a function of the request's tokens (same context, same continuation)."""
    return int.from_bytes(hashlib.blake2b(str(list(token_ids)).encode(), digest_size=4).digest(), "little")


def make_generator(llm, eos_ids: list[int], sampling: dict, request_seeds: bool):
    from vllm import SamplingParams

    from arc_trl.rollout import VLLMGenerator

    if not request_seeds:
        return VLLMGenerator(llm, eos_ids, **sampling)

    class ContextSeededGenerator(VLLMGenerator):
        """`VLLMGenerator` with a per-request seed (`context_seed`), in lock-step calls and per-episode streams."""

        request_seed = staticmethod(context_seed)

        def generate(self, sequences, max_tokens, keys=None):
            params = [SamplingParams(max_tokens=max_tokens, logprobs=0, seed=context_seed(s), **self.sampling)
                      for s in sequences]
            outputs = self.llm.generate([{"prompt_token_ids": s} for s in sequences], params, use_tqdm=False)
            ids = [list(out.outputs[0].token_ids) for out in outputs]
            from arc_trl.rollout.streams import sampled_logprobs

            return ids, [sampled_logprobs(out.outputs[0]) for out in outputs]

    return ContextSeededGenerator(llm, eos_ids, **sampling)


def load_episodes_inputs(tokenizer, count: int, max_prompt_tokens: int, dataset: str = "arc-agi-1/train",
                         prompt_template: str | None = None):
    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import load_template, render_messages
    from arc_trl.tasks import load_tasks

    template = load_template(prompt_template, "repl") if prompt_template else None
    tasks, prompts = [], []
    for task in load_tasks(dataset):
        messages = render_messages(task, "repl", template=template)
        if len(prompt_ids(tokenizer, messages)) <= max_prompt_tokens:
            tasks.append(task)
            prompts.append(messages)
        if len(tasks) == count:
            break
    if len(tasks) < count:
        raise SystemExit(f"only {len(tasks)} prompts of {dataset} fit in --prompt-tokens {max_prompt_tokens}")
    return tasks, prompts


def summary(episodes) -> dict:
    turns = sum(len(ep.turn_spans) for ep in episodes)
    model = sum(ep.num_model_tokens for ep in episodes)
    return {"episodes": len(episodes), "turns": turns, "model_tokens": model,
            "env_tokens": sum(len(ep.completion_ids) for ep in episodes) - model,
            "mean_turn_tokens": round(model / max(turns, 1), 1),
            "finish_reasons": {r: sum(ep.finish_reason == r for ep in episodes)
                               for r in sorted({ep.finish_reason for ep in episodes})}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model folder (default: a random-init Qwen3 built here)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--tokens-per-turn", type=int, default=128, help="per-turn cap (max_tokens_per_turn)")
    parser.add_argument("--mean-turn-tokens", type=float, default=None,
                        help="end-of-turn logit bias for about this mean turn length (default: tokens-per-turn / 4 "
                             "for the built random model, 0 = no bias for --model)")
    parser.add_argument("--max-completion-length", type=int, default=None,
                        help="episode budget (default: max-turns x (tokens-per-turn + 64))")
    parser.add_argument("--prompt-tokens", type=int, default=1024, help="keep ARC prompts up to this length")
    parser.add_argument("--dataset", default="arc-agi-1/train", help="tasks (e.g. the policy's synthetic: spec)")
    parser.add_argument("--prompt-template", default=None, help="prompt template YAML the policy was trained with")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sandbox-workers", type=int, default=4)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--max-num-seqs", type=int, default=None, help="default: --episodes")
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--request-seeds", action=argparse.BooleanOptionalAction, default=None,
                        help="per-request seeds from the context (default: on with CUDA; CPU vLLM cannot seed requests)")
    parser.add_argument("--out", default=None, help="write the figures to this JSON file")
    args = parser.parse_args()

    from transformers import AutoConfig, AutoTokenizer
    from vllm import LLM, SamplingParams

    from arc_trl.rollout import RolloutSettings, run_episodes
    from arc_trl.sandbox import SandboxPool
    from common import build_bench_model

    model_dir = args.model or str(build_bench_model(args.layers, args.hidden, "scheduling_bench_"))
    if args.mean_turn_tokens is None:
        args.mean_turn_tokens = 0.0 if args.model else args.tokens_per_turn / 4
    budget = args.max_completion_length or args.max_turns * (args.tokens_per_turn + 64)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    eos_ids = [tokenizer.eos_token_id]
    tasks, prompts = load_episodes_inputs(tokenizer, args.episodes, args.prompt_tokens, args.dataset, args.prompt_template)
    sampling = {"temperature": args.temperature}
    if args.mean_turn_tokens > 1:
        vocab = AutoConfig.from_pretrained(model_dir).vocab_size
        sampling["logit_bias"] = {eos_ids[0]: math.log((vocab - 1) / (args.mean_turn_tokens - 1))}

    llm = LLM(model=model_dir, dtype=args.dtype, max_model_len=args.prompt_tokens + budget + 8,
              max_num_seqs=args.max_num_seqs or args.episodes, seed=args.seed, enable_prefix_caching=True,
              gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=args.enforce_eager)
    if args.request_seeds is None:
        import torch

        args.request_seeds = torch.cuda.is_available()
    gen = make_generator(llm, eos_ids, sampling, args.request_seeds)
    gen.generate([[1, 2, 3]] * 2, 8)  # warm-up
    settings = {mode: RolloutSettings(agent_mode="repl", max_turns=args.max_turns,
                                      max_tokens_per_turn=args.tokens_per_turn, max_completion_length=budget,
                                      scheduling=mode) for mode in ("lockstep", "per_episode")}
    times: dict[str, list[float]] = {"lockstep": [], "per_episode": [], "floor": []}
    played: dict[str, list] = {}
    with SandboxPool(num_workers=args.sandbox_workers) as pool:
        for _ in range(args.repeats):
            for mode in ("lockstep", "per_episode"):
                llm.reset_prefix_cache()
                start = time.perf_counter()
                played[mode] = run_episodes(tasks, prompts, gen, tokenizer, pool, settings[mode])
                times[mode].append(time.perf_counter() - start)
            lengths = [max(1, ep.num_model_tokens) for ep in played["per_episode"]]
            params = [SamplingParams(max_tokens=n, min_tokens=n, ignore_eos=True, **sampling) for n in lengths]
            llm.reset_prefix_cache()
            start = time.perf_counter()
            out = llm.generate([{"prompt_token_ids": ep.prompt_ids} for ep in played["per_episode"]], params,
                               use_tqdm=False)
            times["floor"].append(time.perf_counter() - start)
            assert [len(o.outputs[0].token_ids) for o in out] == lengths
    median = {k: statistics.median(v) for k, v in times.items()}
    same = sum(a.completion_ids == b.completion_ids for a, b in zip(played["lockstep"], played["per_episode"]))
    result = {
        "model": model_dir if args.model else f"random-init Qwen3 {args.layers} layers x {args.hidden} hidden",
        "device": _device(), "args": vars(args), "episode_budget": budget,
        "lockstep": summary(played["lockstep"]), "per_episode": summary(played["per_episode"]),
        "identical_episodes": same, "seconds": times, "median_s": median,
        "lockstep_over_per_episode": median["lockstep"] / median["per_episode"],
        "per_episode_over_floor": median["per_episode"] / median["floor"],
        "lockstep_over_floor": median["lockstep"] / median["floor"],
    }
    print(f"model: {result['model']}; {args.episodes} episodes x up to {args.max_turns} turns, per-turn cap "
          f"{args.tokens_per_turn}, mean-turn-tokens bias {args.mean_turn_tokens:g}, budget {budget}; {result['device']}")
    for mode in ("lockstep", "per_episode"):
        s = result[mode]
        print(f"{mode:12s}: {median[mode]:7.2f} s  {s['model_tokens'] / median[mode]:8.1f} model tokens/s  "
              f"({s['turns']} turns, {s['model_tokens']} model + {s['env_tokens']} env tokens, "
              f"{s['mean_turn_tokens']} tokens/turn, {s['finish_reasons']})")
    print(f"{'floor':12s}: {median['floor']:7.2f} s  {result['per_episode']['model_tokens'] / median['floor']:8.1f} "
          "model tokens/s  (the per-episode run's model tokens, one continuous batch)")
    print(f"identical episodes in both modes: {same}/{args.episodes}")
    print(f"ratio lockstep / per_episode : {result['lockstep_over_per_episode']:.2f}x  (goal >= 1.4x)")
    print(f"ratio per_episode / floor    : {result['per_episode_over_floor']:.2f}x  (goal <= 1.3x)")
    print(f"ratio lockstep / floor       : {result['lockstep_over_floor']:.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (CUDA vLLM)"
    return f"CPU vLLM, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}"


if __name__ == "__main__":
    main()
