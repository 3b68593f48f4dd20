"""SFT warm-start data: reference episodes of synthetic tasks, as chat conversations.

Program mode: [system, user, assistant(program)]. REPL mode: the reference turns are replayed through the real
sandbox, so the environment replies (user messages) are exactly what the rollout would show the model; an episode
that does not end with a correct SUBMIT is dropped (and counted), never trained on.

`privileged` ("program" | "solutions" | "none"): the prompt is the privileged variant of the distillation
teacher (`render_messages(..., privileged=...)`: the reference program or the test outputs appended to the user
message), the targets are unchanged. SFT on such rows trains a privileged teacher to use its hint (the prime-rl ARC
fork's Phase 1 self-distillation); `"none"` (default) gives the student's rows.

A pool that checks `transform` (`SandboxConfig.check_transform`, the coder prompt's REPL convention) gets REPL episodes
of one turn instead: the program answer, which the check submits.
"""

from __future__ import annotations

from dataclasses import dataclass

from arc_trl.data.prompts import render_messages
from arc_trl.data.task import ArcTask
from arc_trl.rewards.scoring import exact_match

PRIVILEGED_SFT = ("none", "program", "solutions")  # the values of arc-trl train's teacher_privileged


@dataclass
class SftBuildReport:
    kept: int = 0
    dropped: int = 0
    dropped_ids: list[str] | None = None


def reference_conversation(task: ArcTask, mode: str, session=None, template=None,
                           privileged: str = "none") -> list[dict] | None:
    """The full reference conversation of a synthetic task, or None when its replay does not solve the task. A REPL
    session whose pool checks `transform` (`SandboxConfig.check_transform`) gets the one-turn program answer."""
    if mode == "repl" and session is not None and session.config.check_transform:
        return _replay_checked([task], [session], template, lambda items: [s.run_turn(t) for s, t in items],
                               privileged)[0]
    if mode == "program":
        from arc_trl.synthetic import program_completion

        return render_messages(task, mode, template=template, privileged=privileged) + [
            {"role": "assistant", "content": program_completion(task)}
        ]
    return _replay_repl([task], [session], template, lambda items: [s.run_turn(t) for s, t in items], privileged)[0]


def _replay_repl(tasks: list[ArcTask], sessions: list, template, run_turns,
                 privileged: str = "none") -> list[list[dict] | None]:
    """Replay the reference REPL turns of `tasks`, turn by turn, each turn of all still-running tasks in one
    `run_turns([(session, text), ...])` call (the pool runs them in parallel)."""
    from arc_trl.synthetic import repl_turns

    turns = [repl_turns(task) for task in tasks]
    conversations: list[list[dict] | None] = [render_messages(t, "repl", template=template, privileged=privileged)
                                              for t in tasks]
    running = list(range(len(tasks)))
    for k in range(max(len(t) for t in turns)):
        running = [i for i in running if k < len(turns[i])]
        results = run_turns([(sessions[i], turns[i][k]) for i in running])
        still = []
        for i, result in zip(running, results, strict=True):
            conversations[i].append({"role": "assistant", "content": turns[i][k]})
            if result.submitted is None:
                conversations[i].append({"role": "user", "content": result.observation})
                still.append(i)
                continue
            task = tasks[i]
            solved = task.test_outputs is not None and all(
                exact_match(p, t) for p, t in zip(result.submitted, task.test_outputs, strict=True)
            )
            if not (solved and k == len(turns[i]) - 1):
                conversations[i] = None
        running = still
    for i in running:  # never submitted
        conversations[i] = None
    return conversations


def _replay_checked(tasks: list[ArcTask], sessions: list, template, run_turns,
                    privileged: str = "none") -> list[list[dict] | None]:
    """REPL episodes of one turn, the program answer, for a sandbox that checks `transform` and submits its outputs
    (the coder prompt's convention): kept when the check submits the right test outputs."""
    from arc_trl.synthetic import program_completion

    answers = [program_completion(task) for task in tasks]
    results = run_turns(list(zip(sessions, answers)))
    conversations: list[list[dict] | None] = []
    for task, answer, result in zip(tasks, answers, results, strict=True):
        solved = result.submitted is not None and task.test_outputs is not None and all(
            exact_match(p, t) for p, t in zip(result.submitted, task.test_outputs, strict=True))
        conversations.append(render_messages(task, "repl", template=template, privileged=privileged)
                             + [{"role": "assistant", "content": answer}] if solved else None)
    return conversations


def build_sft_dataset(tasks: list[ArcTask], mode: str, pool=None, template=None, chunk_size: int = 64,
                      privileged: str = "none"):
    """A `datasets.Dataset` with a `messages` column (for TRL's SFTTrainer, assistant-only loss) and a report.
    REPL episodes are replayed `chunk_size` tasks at a time, their turns spread over the pool's workers.
    `privileged`: the prompts' privileged block (module docstring)."""
    from datasets import Dataset

    if privileged not in PRIVILEGED_SFT:
        raise ValueError(f"privileged must be one of {', '.join(PRIVILEGED_SFT)}, got {privileged!r}")
    rows, report = [], SftBuildReport(dropped_ids=[])
    for start in range(0, len(tasks), chunk_size):
        chunk = tasks[start : start + chunk_size]
        if mode == "repl":
            sessions = pool.open_sessions(chunk)  # started in parallel
            replay = _replay_checked if pool.config.check_transform else _replay_repl
            try:
                conversations = replay(chunk, sessions, template, pool.map_turns, privileged)
            finally:
                pool.close_sessions(sessions)
        else:
            conversations = [reference_conversation(task, mode, template=template, privileged=privileged)
                             for task in chunk]
        for task, conversation in zip(chunk, conversations, strict=True):
            if conversation is None:
                report.dropped += 1
                report.dropped_ids.append(task.id)
            else:
                report.kept += 1
                rows.append({"messages": conversation, "task_id": task.id})
    if not rows:
        raise ValueError(f"no reference episode solved its task ({report.dropped} dropped): check the sandbox")
    return Dataset.from_list(rows), report
