"""The per-task loop of a test-time run: skip what is finished, keep the budgets, run each task in its folder.

The work on one task (adapt, then attempt the test inputs) is a `TaskRunner`: `arc_trl.ttrl.adapt.AdaptingRunner`
in a real run, any callable in tests. A task is finished once its runner has returned and its `done.json` is written
(`arc_trl.ttrl.task_folder`), so a run killed at any point loses no finished task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from arc_trl.data.task import ArcTask
from arc_trl.ttrl.budget import Budget
from arc_trl.ttrl.task_folder import TaskFolder


class TaskRunner(Protocol):
    def __call__(self, task: ArcTask, folder: TaskFolder, train_seconds: float | None) -> dict[str, Any]:
        """Adapt to `task` (training at most `train_seconds`, None: no time cap), write its attempts into
        `folder.completions`; returns the task's record (JSON-serialisable)."""


@dataclass
class LoopReport:
    ran: list[str] = field(default_factory=list)  # finished by this run
    skipped_done: list[str] = field(default_factory=list)  # finished by an earlier run
    not_started: list[str] = field(default_factory=list)  # the total budget was spent first
    not_adapted: dict[str, str] = field(default_factory=dict)  # task -> why it was attempted without adaptation


def run_tasks(tasks: Sequence[ArcTask], out: str | Path, runner: TaskRunner, budget: Budget,
              log: Callable[[str], None] = print) -> LoopReport:
    """Each task in order (see the module docstring). A task's test outputs are never needed: pass tasks without
    them (`ArcTask.without_solutions`)."""
    report = LoopReport()
    for n, task in enumerate(tasks, start=1):
        folder = TaskFolder(out, task.id)
        where = f"[ttrl] task {n}/{len(tasks)} {task.id}"
        if folder.done:
            report.skipped_done.append(task.id)
            _note_not_adapted(report, task.id, folder.record())
            log(f"{where}: finished by an earlier run, skipped")
            continue
        allowance = budget.allowance()
        if not allowance.start:
            report.not_started.append(task.id)
            log(f"{where}: not started: {allowance.reason}")
            continue
        folder.reset()
        record = runner(task, folder, allowance.train_seconds)
        folder.finish(record)
        report.ran.append(task.id)
        _note_not_adapted(report, task.id, record)
        log(f"{where}: {describe(record)}")
    return report


def _note_not_adapted(report: LoopReport, task_id: str, record: dict[str, Any]) -> None:
    if not record.get("adapted", False):
        report.not_adapted[task_id] = record.get("reason", "not adapted")


def describe(record: dict[str, Any]) -> str:
    """One line of a task's record."""
    if record.get("adapted"):
        head = (f"adapted: {record.get('steps', 0)} GRPO steps in {record.get('train_seconds', 0):.1f} s on "
                f"{record.get('loo_prompts', 0)} leave-one-out prompts ({record.get('stopped_by', '')})")
    else:
        head = f"not adapted ({record.get('reason', '?')})"
    return f"{head}; {record.get('n_attempts', 0)} attempts in {record.get('attempt_seconds', 0):.1f} s"
