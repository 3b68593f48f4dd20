"""Cost of the collapse guard per training step: the repetition signals over a batch of episodes and one detector
update, on synthetic token data shaped like a real GRPO step (no model needed).

    python benchmarks/collapse_guard_bench.py [--episodes 256 --model-tokens 2000 --turns 4 --repeats 5]

Prints milliseconds per step for `episode_repetition` over every episode (what `episode_metrics` in
arc_trl/trainer/batch_metrics.py adds) and for `CollapseDetector.update` (what the callback adds), for
natural-looking and fully looping text.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arc_trl.collapse.detector import CollapseDetector  # noqa: E402
from arc_trl.collapse.signals import episode_repetition  # noqa: E402
from arc_trl.rollout.episode import Episode  # noqa: E402


def make_episode(rng: random.Random, model_tokens: int, turns: int, looping: bool, vocab: int = 150_000) -> Episode:
    ep = Episode(task=None, prompt_ids=[])
    per_turn = model_tokens // turns
    for _ in range(turns):
        if looping:
            pattern = [rng.randrange(vocab) for _ in range(5)]
            tokens = (pattern * (per_turn // 5 + 1))[:per_turn]
        else:  # mostly distinct tokens, 30% from a 50-token core (some natural repetition)
            tokens = [rng.randrange(vocab) if rng.random() < 0.7 else rng.randrange(50) for _ in range(per_turn)]
        ep.add_model_turn(tokens, None, "")
        ep.add_env_turn([rng.randrange(vocab) for _ in range(200)], "")
    return ep


def time_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--model-tokens", type=int, default=2000, help="model tokens per episode")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(0)
    for looping in (False, True):
        episodes = [make_episode(rng, args.model_tokens, args.turns, looping) for _ in range(args.episodes)]
        ms = time_ms(lambda eps=episodes: [episode_repetition(ep) for ep in eps], args.repeats)
        frac = sum(r.repeated for r in map(episode_repetition, episodes)) / (args.episodes * args.model_tokens)
        kind = "looping" if looping else "natural"
        print(f"repetition signals, {kind:7s} text: {args.episodes} episodes x {args.model_tokens} model tokens "
              f"({args.turns} turns): {ms:.1f} ms per step ({1e6 * ms / (args.episodes * args.model_tokens):.0f} ns "
              f"per token; repeat_frac {frac:.2f})")
    detector = CollapseDetector()
    metrics = {"reward": 1.0, "entropy": 0.5, "episode/repeat_frac": 0.1, "episode/repeat_run": 10.0,
               "episode/truncated_rate": 0.1, "episode/model_tokens": 300.0, "episode/code_parsed_rate": 0.9,
               "episode/submit_rate": 0.8, "loss": 0.0, "grad_norm": 1.0}
    step = iter(range(10**9))
    ms = time_ms(lambda: [detector.update(next(step), metrics) for _ in range(1000)], args.repeats) / 1000
    print(f"detector update: {ms * 1000:.0f} us per logged step")


if __name__ == "__main__":
    main()
