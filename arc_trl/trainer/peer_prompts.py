"""The peer teacher's prompts of a generation batch (`teacher_privileged: peer`; the pure rules: arc_trl.opd.peer).

Where the rewards are known: after TRL's `_generate_and_score_completions`, whose rewards are gathered over all
processes in process order (`_calculate_rewards`), each process holding `len(prompts)` consecutive rows of the
generation batch (its `process_slice`). TRL's `RepeatSampler` puts the `num_generations` rows of one prompt next to
each other in that global order, and arc-trl's rollout keeps the row order (episode i is row i), so a GRPO group is
`num_generations` consecutive global rows. A group can span two processes (when `len(prompts)` is not a multiple of
`num_generations`), so the peers are chosen over the whole batch: each process gathers every row's prompt key and the
code of its successful episodes (`gather_object`: collective, every process calls it in the same order), then builds
the teacher prompts of its own rows.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from arc_trl.chat_template import prompt_ids
from arc_trl.rewards.modes import highest_reward
from arc_trl.opd.peer import choose_peers, peer_block, peer_code, with_peer


def prompt_key(row: dict[str, Any]) -> str:
    """What makes two rows one GRPO group: the same prompt (its messages) of the same task."""
    text = json.dumps([row.get("task_id"), row["prompt"]], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def min_peer_reward(arc) -> float:
    return arc.peer_min_reward if arc.peer_min_reward is not None else highest_reward(arc.reward_mode)


def peer_prompt_ids(trainer, rows: list[dict[str, Any]], episodes, rewards) -> list[list[int] | None]:
    """For each of this process's episodes, the teacher's prompt ids (the student's prompt, the peer's block
    appended), or None where its group has no other episode at `peer_min_reward` or more.

    `rewards`: the batch's weighted rewards over all processes, in process order (`ArcGRPOTrainer._last_rewards`)."""
    from accelerate.utils import gather_object

    arc = trainer.arc_config
    if rewards is None:
        raise RuntimeError("teacher_privileged=peer needs the batch's rewards (TeacherTerm.apply(..., rewards=...))")
    rewards = [float(r) for r in rewards.tolist()]
    start = trainer.accelerator.process_index * len(episodes)
    if start + len(episodes) > len(rewards):
        raise RuntimeError(f"peer teacher: {len(rewards)} rewards cannot hold this process's rows "
                           f"{start}..{start + len(episodes) - 1}")
    threshold = min_peer_reward(arc)
    local = [(prompt_key(row), peer_code(ep.assistant_texts, arc.peer_max_chars)
              if rewards[start + i] >= threshold else None) for i, (row, ep) in enumerate(zip(rows, episodes))]
    gathered = gather_object(local)  # every process's (key, code) in process order
    if len(gathered) != len(rewards):
        raise RuntimeError(f"peer teacher: {len(gathered)} gathered rows for {len(rewards)} rewards")
    training = trainer.model.training
    num_generations = trainer.num_generations if training else trainer.num_generations_eval
    peers = choose_peers(rewards, [key for key, _ in gathered], num_generations, threshold)
    top = highest_reward(arc.reward_mode)
    out: list[list[int] | None] = []
    for i, row in enumerate(rows):
        j = peers[start + i]
        if j is None:
            out.append(None)
            continue
        messages = with_peer(row["prompt"], peer_block(gathered[j][1], rewards[j], top))
        out.append(prompt_ids(trainer.processing_class, messages, **(trainer.chat_template_kwargs or {})))
    return out

