"""ArcGRPOTrainer step time (teacher off, single-turn program mode) vs vanilla TRL GRPOTrainer on the same workload.

    python benchmarks/trainer_overhead_bench.py [--steps 12 --warmup 2]

Same model, data, batch, sampling and generation backend (transformers, TRL's own `_generate_single_turn`). The
vanilla trainer gets what a user would write by hand for program mode: a reward function that runs each completion's
`transform` in the same sandbox and applies the BARC ladder. Goal: ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def step_times(trainer, warmup: int) -> list[float]:
    trainer.train()
    times = [h["step_time"] for h in trainer.state.log_history if "step_time" in h]
    return times[warmup:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="alternate the two trainers this many times")
    args = parser.parse_args()

    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.data.dataset import task_from_json_string
    from arc_trl.rewards import compute_reward
    from arc_trl.sandbox import SandboxPool, replay_attempt
    from arc_trl.models.tiny_model import build_tiny_model
    from arc_trl.trainer import ArcGRPOTrainer

    workdir = Path(tempfile.mkdtemp(prefix="overhead_bench_"))
    model_dir = build_tiny_model(workdir / "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tasks = load_tasks("arc-agi-1/train")[:64]
    dataset = build_dataset(tasks, "program", tokenizer=tokenizer, max_prompt_tokens=1024)
    pool = SandboxPool(num_workers=2)

    def program_reward(completions, task_json, task_id, **kwargs):
        rewards = []
        for completion, text, tid in zip(completions, task_json, task_id):
            task = task_from_json_string(text, tid)
            outcome = replay_attempt(pool, task, completion[0]["content"], mode="program")
            rewards.append(compute_reward("barc", outcome, task, agent_mode="program"))
        return rewards

    def config(name: str) -> GRPOConfig:
        return GRPOConfig(
            output_dir=str(workdir / name), per_device_train_batch_size=8, num_generations=4,
            max_completion_length=64, max_steps=args.steps, use_cpu=True, bf16=False, report_to=[], seed=0,
            logging_steps=1, save_strategy="no", beta=0.0,
        )

    results: dict[str, list[float]] = {"vanilla GRPOTrainer": [], "ArcGRPOTrainer": []}
    for _ in range(args.repeats):
        vanilla = GRPOTrainer(str(model_dir), program_reward, config("vanilla"), train_dataset=dataset,
                              processing_class=tokenizer)
        results["vanilla GRPOTrainer"] += step_times(vanilla, args.warmup)
        arc = ArcConfig(agent_mode="program", reward_mode="barc", log_reward_components=False, sandbox_workers=2)
        ours = ArcGRPOTrainer(str(model_dir), config("arc"), arc, train_dataset=dataset, processing_class=tokenizer,
                              sandbox_pool=pool)
        results["ArcGRPOTrainer"] += step_times(ours, args.warmup)
    pool.close()
    for name, times in results.items():
        print(f"{name:22s}: median step {statistics.median(times) * 1000:7.1f} ms  (mean {statistics.mean(times) * 1000:7.1f} ms, n={len(times)})")
    ratio = statistics.median(results["ArcGRPOTrainer"]) / statistics.median(results["vanilla GRPOTrainer"])
    print(f"ratio ArcGRPOTrainer / GRPOTrainer: {ratio:.3f}  (goal <= 1.05)")


if __name__ == "__main__":
    main()
