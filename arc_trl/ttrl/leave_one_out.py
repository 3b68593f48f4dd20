"""Leave-one-out episodes of a task whose test outputs are unknown: the training pairs are the only labels.

For a task with n >= 2 training pairs, `leave_one_out_tasks` gives n tasks; task k shows the other n - 1 pairs as its
training examples and the input of pair k in the place of the test input, and its (only) test output is pair k's
output: what the reward scores the prediction against. That output is a *test output* of the derived task, so every
guard the project already has for test outputs keeps it from the model: prompts render test inputs only
(`arc_trl.data.prompts`), the sandbox is sent the training pairs and test inputs only (`arc_trl.sandbox.session`), and
`arc-trl ttrl` refuses a teacher prompt that would carry test outputs (`arc_trl.ttrl.settings`).
"""

from __future__ import annotations

from typing import Any

from arc_trl.data.task import ArcTask

HELD_OUT_SEPARATOR = ":heldout-"  # "<task id>:heldout-<k>"; no "|", which marks an augmented copy


def can_leave_one_out(task: ArcTask) -> bool:
    """True when the task has a training pair to hold out and at least one left to show (n >= 2)."""
    return len(task.train) >= 2


def leave_one_out_tasks(task: ArcTask) -> list[ArcTask]:
    """One derived task per training pair (see the module docstring); [] for a task with a single training pair.

    The task's own test inputs and outputs, and its metadata (a reference program, say), are not carried over."""
    if not can_leave_one_out(task):
        return []
    derived = []
    for k, held in enumerate(task.train):
        shown = [pair for i, pair in enumerate(task.train) if i != k]
        derived.append(ArcTask(id=f"{task.id}{HELD_OUT_SEPARATOR}{k}", train=shown, test_inputs=[held.input],
                               test_outputs=[held.output], source=task.source,
                               metadata={"ttrl_task": task.id, "held_out_pair": k}))
    return derived


def tile_rows(rows: list[dict[str, Any]], at_least: int) -> list[dict[str, Any]]:
    """`rows` repeated in order until there are `at_least` of them: a generation batch needs that many distinct
    prompt slots (`generation_batch_size / num_generations`), and a task may have fewer leave-one-out prompts."""
    if not rows:
        return []
    out = list(rows)
    while len(out) < at_least:
        out.append(rows[len(out) % len(rows)])
    return out
