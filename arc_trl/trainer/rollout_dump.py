"""`dump_rollouts`: the first episodes of a generation batch written to JSONL, for debugging and `arc-trl view`.

One file per optimizer step, `output_dir/rollouts/step_NNNNNN.jsonl`, appended to by each generation batch of the step.
A record keeps everything an episode was: the task it played (train pairs, test inputs and expected outputs), the
conversation after the prompt (`messages`) and the reply to its last turn that the model never saw
(`final_observation`), its outcome with the expected grids and per-test verdicts beside the predictions
(`test_outputs`, `test_correct`, `test_pixel`, `passed`), the reward and its parts (`reward_parts`, one value per
reward function, unweighted), and, unless `tokens=False` (`dump_rollout_tokens: false`), the token arrays (prompt and
completion ids, env mask, sampler log-probs, per-token advantages).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence

from arc_trl.eval.score import score_attempt

TOKEN_FIELDS = ("prompt_ids", "completion_ids", "env_mask", "sampler_logprobs")


def dump_rollouts(output_dir: str, step: int, episodes, rewards, advantages, decode, limit: int,
                  reward_parts: Mapping[str, Sequence[float]] | None = None, tokens: bool = True) -> None:
    """Write the first `limit` episodes with their reward (None: unknown), reward parts and advantage;
    `decode(ids) -> text`. `tokens=False` leaves the token arrays out (the advantage becomes its mean)."""
    folder = os.path.join(output_dir, "rollouts")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"step_{step:06d}.jsonl")
    with open(path, "a") as f:
        for i, ep in enumerate(episodes[:limit]):
            f.write(json.dumps(episode_dump(ep, step, i, rewards, advantages, decode, reward_parts, tokens)) + "\n")


def episode_dump(ep, step: int, i: int, rewards, advantages, decode, reward_parts=None, tokens: bool = True) -> dict:
    """The dump record of the batch's `i`-th episode (module docstring)."""
    adv = advantages[i]
    per_token = bool(adv.dim())
    verdicts = score_attempt(ep.task, ep.outcome)
    record = {
        "step": step,
        "task_id": ep.task.id,
        "index": ep.index,
        "policy_version": ep.policy_version,
        "finish_reason": ep.finish_reason,
        "num_turns": len(ep.assistant_texts),
        "num_model_tokens": ep.num_model_tokens,
        "num_completion_tokens": len(ep.completion_ids),
        "reward": None if rewards is None else float(rewards[i]),
        "reward_parts": None if reward_parts is None else {
            name: _finite(values[i]) for name, values in reward_parts.items()
        },
        "outcome": ep.outcome.to_dict(),
        **{key: verdicts[key] for key in ("test_outputs", "test_correct", "test_pixel", "passed")},
        "task": ep.task.to_json(),
        "messages": ep.messages(),
        "final_observation": ep.final_observation,
    }
    if tokens:
        record.update(
            prompt_ids=ep.prompt_ids,
            completion_ids=ep.completion_ids,
            env_mask=ep.env_mask,
            sampler_logprobs=None if ep.logprobs is None else [_finite(lp) for lp in ep.logprobs],
            advantage=adv.tolist() if per_token else float(adv),
        )
    elif per_token:  # its mean over the model's tokens
        values = [a for a, m in zip(adv.tolist(), ep.env_mask) if m]
        record["advantage"] = sum(values) / len(values) if values else 0.0
    else:
        record["advantage"] = float(adv)
    record["text"] = decode(ep.prompt_ids + ep.completion_ids)
    return record


def _finite(value) -> float | None:
    value = float(value)
    return None if value != value else value  # NaN (no value) -> null: valid JSON
