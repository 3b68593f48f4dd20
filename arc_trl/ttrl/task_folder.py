"""One task's folder of a test-time run, `OUT/tasks/TASK_ID/`, and what makes a task finished.

    completions.jsonl   the attempts on the real test inputs (`arc-trl evaluate generate`'s format: each line's
                        `outcome` holds its `test_predictions`), appended as each episode ends
    train/              the task's GRPO run (TRL's output_dir: logs, rollout dumps when asked)
    adapter/            the adapted LoRA (`keep_adapters`; removable: nothing reads it back)
    done.json           the task's record (adapted or why not, steps, seconds, attempts): written last, atomically

A folder with `done.json` is finished and is skipped by a rerun; a folder without it is half-finished (the run was
killed inside it) and is cleared and redone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from arc_trl.eval.attempts_file import COMPLETIONS_FILE, read_completions_file

TASKS_FOLDER = "tasks"
DONE_FILE = "done.json"


def safe_folder_name(task_id: str) -> str:
    """A task id as one path component (ids come from user files: no separators, no `..`)."""
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
    return name if name.strip(".") else f"_{name}"


class TaskFolder:
    def __init__(self, out: str | Path, task_id: str) -> None:
        self.task_id = task_id
        self.path = Path(out) / TASKS_FOLDER / safe_folder_name(task_id)

    @property
    def completions(self) -> Path:
        return self.path / COMPLETIONS_FILE

    @property
    def train_dir(self) -> Path:
        return self.path / "train"

    @property
    def adapter_dir(self) -> Path:
        return self.path / "adapter"

    @property
    def done(self) -> bool:
        return (self.path / DONE_FILE).is_file()

    def record(self) -> dict[str, Any]:
        """The finished task's record ({} when not finished)."""
        return json.loads((self.path / DONE_FILE).read_text()) if self.done else {}

    def reset(self) -> None:
        """An empty folder: what a killed run left half-finished is removed."""
        if self.path.exists():
            shutil.rmtree(self.path)
        self.path.mkdir(parents=True)

    def finish(self, record: dict[str, Any]) -> None:
        """Write the record, last and atomically: the task is finished once `done.json` exists."""
        tmp = self.path / (DONE_FILE + ".tmp")
        tmp.write_text(json.dumps({"task_id": self.task_id, **record}, indent=2, default=str))
        os.replace(tmp, self.path / DONE_FILE)

    def attempts(self) -> list[dict[str, Any]]:
        """The finished task's attempt records ([] when unfinished or without attempts)."""
        return read_completions_file(self.completions, repair=False) if self.done else []
