"""The peer teacher's prompt (`teacher_privileged: peer`): another, successful, episode of the same GRPO group.

SDPO-style self-distillation (arXiv 2601.20802; TRL's `trl.experimental.sdpo` builds its teacher context the same
way): a GRPO group is the `num_generations` episodes of one prompt, consecutive in the batch (TRL's `RepeatSampler`);
an episode whose reward reached the threshold is a *peer* of the others of its group. The teacher sees the student's
prompt with a short block appended to its user message: the code the peer ran and the fact that it succeeded, nothing
else (no grid of the hidden solution; only what the peer itself wrote). An episode is never its own peer, and a
peer never comes from another group. Pure functions here; the trainer's side (rewards, processes, tokens) is
`arc_trl.trainer.peer_prompts`.
"""

from __future__ import annotations

from collections.abc import Sequence

from arc_trl.sandbox.code_blocks import extract_code_blocks

PEER_BLOCK = (
    "Privileged information (hidden from the solver): an earlier attempt at this same puzzle succeeded (reward "
    "{reward:g}; the top score is {top:g}). The code it ran:\n```python\n{code}\n```\nUse it to guide your "
    "reasoning, but solve the task as if you had discovered the answer yourself, following the instructions above."
)
TRUNCATED_NOTE = "\n# ... (the rest of the peer's code is left out)"


def choose_peers(rewards: Sequence[float], group_keys: Sequence[str], num_generations: int,
                 min_reward: float) -> list[int | None]:
    """For each episode of the (process-wide, gathered) batch, the index of its peer, or None.

    Groups are `num_generations` consecutive episodes; the peer of an episode is the first other episode of its group
    whose reward is >= `min_reward` (so the group's only success has none). `group_keys` (one per episode, e.g. its
    prompt's hash) must agree within each group: a group mixing prompts is a broken batch, never silently paired.
    """
    if num_generations < 1 or len(rewards) % num_generations or len(group_keys) != len(rewards):
        raise ValueError(f"peer teacher: {len(rewards)} rewards and {len(group_keys)} keys do not form groups of "
                         f"num_generations={num_generations}")
    peers: list[int | None] = []
    for start in range(0, len(rewards), num_generations):
        group = range(start, start + num_generations)
        if len({group_keys[i] for i in group}) != 1:
            raise RuntimeError(f"peer teacher: the episodes {start}..{start + num_generations - 1} of the batch are "
                               "one GRPO group but come from different prompts (expected TRL's RepeatSampler order)")
        successes = [i for i in group if rewards[i] >= min_reward]
        peers += [next((j for j in successes if j != i), None) for i in group]
    return peers


def peer_code(assistant_texts: Sequence[str], max_chars: int) -> str:
    """The code an episode ran: its assistant turns' code blocks in order (the whole text of a turn without one),
    the first `max_chars` characters."""
    parts = []
    for text in assistant_texts:
        blocks = extract_code_blocks(text)
        parts.append("\n\n".join(b.strip("\n") for b in blocks) if blocks else text.strip())
    code = "\n\n".join(p for p in parts if p)
    return code if len(code) <= max_chars else code[:max_chars] + TRUNCATED_NOTE


def peer_block(code: str, reward: float, top: float) -> str:
    return PEER_BLOCK.format(code=code, reward=reward, top=top)


def with_peer(messages: list[dict], block: str) -> list[dict]:
    """The student's prompt messages with `block` appended to the last user message (as the other privileged
    prompts: arc_trl.data.prompts), everything else unchanged."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        raise ValueError("peer teacher: the prompt has no user message to append the peer's code to")
    out = [dict(m) for m in messages]
    out[last_user]["content"] = f"{out[last_user]['content']}\n\n{block}"
    return out
