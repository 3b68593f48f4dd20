"""SFT warm-start data: reference episodes of synthetic tasks, as chat conversations.

Program mode: [system, user, assistant(program)]. REPL mode: the reference turns are replayed through the real
sandbox, so the environment replies (user messages) are exactly what the rollout would show the model; an episode
that does not end with a correct SUBMIT is dropped (and counted), never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_trl.data.prompts import render_messages
from arc_trl.data.task import ArcTask
from arc_trl.rewards.scoring import exact_match


@dataclass
class SftBuildReport:
    kept: int = 0
    dropped: int = 0
    dropped_ids: list[str] | None = None


def reference_conversation(task: ArcTask, mode: str, session=None, template=None) -> list[dict] | None:
    """The full reference conversation of a synthetic task, or None when its replay does not solve the task."""
    from arc_trl.synthetic import program_completion, repl_turns

    messages = render_messages(task, mode, template=template)
    if mode == "program":
        return messages + [{"role": "assistant", "content": program_completion(task)}]
    turns = repl_turns(task)
    for i, text in enumerate(turns):
        messages.append({"role": "assistant", "content": text})
        result = session.run_turn(text)
        if result.submitted is not None:
            solved = task.test_outputs is not None and all(
                exact_match(p, t) for p, t in zip(result.submitted, task.test_outputs, strict=True)
            )
            return messages if solved and i == len(turns) - 1 else None
        messages.append({"role": "user", "content": result.observation})
    return None


def build_sft_dataset(tasks: list[ArcTask], mode: str, pool=None, template=None):
    """A `datasets.Dataset` with a `messages` column (for TRL's SFTTrainer, assistant-only loss) and a report."""
    from datasets import Dataset

    rows, report = [], SftBuildReport(dropped_ids=[])
    for task in tasks:
        session = pool.new_session(task) if mode == "repl" else None
        try:
            conversation = reference_conversation(task, mode, session, template)
        finally:
            if session is not None:
                session.close()
        if conversation is None:
            report.dropped += 1
            report.dropped_ids.append(task.id)
        else:
            report.kept += 1
            rows.append({"messages": conversation, "task_id": task.id})
    if not rows:
        raise ValueError(f"no reference episode solved its task ({report.dropped} dropped): check the sandbox")
    return Dataset.from_list(rows), report
