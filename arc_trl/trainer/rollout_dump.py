"""`dump_rollouts`: the first episodes of a generation batch (tokens, masks, rewards) written to JSONL, for debugging.

One file per optimizer step, `output_dir/rollouts/step_NNNNNN.jsonl`, appended to by each generation batch of the step.
"""

from __future__ import annotations

import json
import os


def dump_rollouts(output_dir: str, step: int, episodes, rewards, advantages, decode, limit: int) -> None:
    """Write the first `limit` episodes with their reward (None: unknown) and advantage; `decode(ids) -> text`."""
    folder = os.path.join(output_dir, "rollouts")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"step_{step:06d}.jsonl")
    with open(path, "a") as f:
        for i, ep in enumerate(episodes[:limit]):
            adv = advantages[i]
            record = {
                "task_id": ep.task.id,
                "finish_reason": ep.finish_reason,
                "prompt_ids": ep.prompt_ids,
                "completion_ids": ep.completion_ids,
                "env_mask": ep.env_mask,
                "sampler_logprobs": None if ep.logprobs is None else [
                    None if lp != lp else lp for lp in ep.logprobs  # NaN (no sampler value) -> null: valid JSON
                ],
                "reward": None if rewards is None else float(rewards[i]),
                "advantage": adv.tolist() if adv.dim() else float(adv),
                "outcome": ep.outcome.to_dict(),
                "text": decode(ep.prompt_ids + ep.completion_ids),
            }
            f.write(json.dumps(record) + "\n")
