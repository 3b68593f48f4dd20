"""Save synthetic tasks in the formats of real ARC data, plus a metadata sidecar; load them back with metadata.

Layouts written by `save_synthetic(tasks, out_dir, fmt)`:

- `folder`: `out_dir/<task_id>.json`, each exactly `{"train": [{"input", "output"}], "test": [{"input", "output"}]}`;
- `kaggle`: `out_dir/<name>_challenges.json` ({task_id: task without test outputs}) and `<name>_solutions.json`
  ({task_id: [test output, ...]});

and in both cases `out_dir/metadata.jsonl`: one JSON object per task with `id`, `family`, `params`,
`reference_program`, `difficulty`, `rule` and (unless `transcripts=False`) `program_completion` and `repl_turns`.
Every ARC tool reads the task files; `load_synthetic(out_dir)` also restores `task.metadata` from the sidecar.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arc_trl.data.loaders import load_task_files, save_kaggle, save_tasks_folder
from arc_trl.data.task import ArcTask, TaskValidationError
from arc_trl.synthetic.transcripts import program_completion, repl_turns

METADATA_FILE = "metadata.jsonl"
FORMATS = ("folder", "kaggle")
TASK_METADATA_KEYS = ("family", "params", "reference_program", "difficulty", "rule")


def metadata_record(task: ArcTask, transcripts: bool = True) -> dict[str, Any]:
    """The sidecar line of one task."""
    record: dict[str, Any] = {"id": task.id, **{k: task.metadata[k] for k in TASK_METADATA_KEYS if k in task.metadata}}
    if transcripts:
        record["program_completion"] = program_completion(task)
        record["repl_turns"] = repl_turns(task)
    return record


def save_synthetic(
    tasks: Iterable[ArcTask],
    out_dir: str | Path,
    fmt: str = "folder",
    name: str = "synthetic",
    transcripts: bool = True,
) -> list[Path]:
    """Write the tasks (`fmt`: folder or kaggle) and `metadata.jsonl` into `out_dir`; return the written files."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    tasks = list(tasks)
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"duplicate task ids: {', '.join(duplicates[:5])}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plain = [dataclasses.replace(t, metadata={}) for t in tasks]  # task files hold only "train" and "test"
    if fmt == "folder":
        save_tasks_folder(plain, out_dir)
        written = [out_dir / f"{t.id}.json" for t in tasks]
    else:
        written = [p for p in save_kaggle(plain, out_dir / f"{name}_challenges.json") if p is not None]
    sidecar = out_dir / METADATA_FILE
    with sidecar.open("w") as f:
        for task in tasks:
            f.write(json.dumps(metadata_record(task, transcripts)) + "\n")
    return [*written, sidecar]


def read_metadata(path: str | Path) -> dict[str, dict[str, Any]]:
    """The sidecar `metadata.jsonl` (a file or the folder holding it) as {task_id: record}."""
    path = Path(path)
    if path.is_dir():
        path = path / METADATA_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no synthetic metadata sidecar ({METADATA_FILE})")
    records = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise TaskValidationError(f"{path}:{number}: invalid JSON: {err.msg}") from None
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise TaskValidationError(f"{path}:{number}: expected an object with a string 'id'")
        records[record["id"]] = record
    return records


def load_synthetic(directory: str | Path) -> list[ArcTask]:
    """Load the tasks written by `save_synthetic` (either layout), with `metadata` restored from the sidecar."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a folder written by save_synthetic / `arc-trl synthetic`")
    challenges = sorted(directory.glob("*_challenges.json"))
    if len(challenges) > 1:
        raise ValueError(f"{directory}: several Kaggle challenges files ({', '.join(p.name for p in challenges)})")
    tasks = load_task_files(challenges[0] if challenges else directory)
    records = read_metadata(directory)
    missing = [t.id for t in tasks if t.id not in records]
    if missing:
        raise TaskValidationError(
            f"{directory / METADATA_FILE}: no metadata for {len(missing)} task(s), e.g. {', '.join(missing[:3])}"
        )
    for task in tasks:
        record = records[task.id]
        task.metadata.update({k: record[k] for k in TASK_METADATA_KEYS if k in record})
    return tasks
