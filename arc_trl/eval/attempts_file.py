"""`completions.jsonl`, the attempts file of `arc-trl evaluate generate`: one JSON line per attempt, appended as it
ends.

`plan_jobs` lists the (task, attempt) pairs a folder still misses (each `Job` with its augmented copy of the task
under `--augment`, fixed per seed, task and attempt by `attempt_augmentation`), `episode_record` turns a finished
episode into its line (`completion_text`: the assistant turns that ran, replayable by `arc-trl evaluate score`), and
`read_completions_file` reads the attempts back, cutting off a last line torn by a crash so a rerun resumes cleanly.
"""

from __future__ import annotations

import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask
from arc_trl.eval.generation_settings import GenerateInputError

COMPLETIONS_FILE = "completions.jsonl"


@dataclass
class Job:
    """One attempt to generate."""

    task_id: str  # the original task id
    attempt: int  # index within the task
    task: ArcTask  # the task the model sees (an augmented copy when `augmentation` is set)
    augmentation: str | None  # None without --augment


def read_completions_file(path: Path, repair: bool = True) -> list[dict[str, Any]]:
    """The attempts already in `path` (each with its `line` number); [] when it does not exist.

    The last line is dropped when it is incomplete (no newline) or not valid JSON: that is a write cut short by a
    crash. With `repair` it is also cut off the file, so that appending continues on a clean line. A bad line
    anywhere else raises GenerateInputError naming it.
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    records, seen, offset = [], set(), 0
    for n, raw in enumerate(data.splitlines(keepends=True), start=1):
        last = offset + len(raw) == len(data)
        try:
            record = json.loads(raw) if raw.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = False
        if last and (not raw.endswith(b"\n") or record is False):
            print(f"note: {path}:{n}: ignoring an incomplete last line (an interrupted run); it is regenerated",
                  file=sys.stderr)
            if repair:
                os.truncate(path, offset)
            break
        offset += len(raw)
        if record is None:
            continue
        if not isinstance(record, dict):
            raise GenerateInputError(f"{path}:{n}: not a JSON object; this file is written by "
                                     "`arc-trl evaluate generate`")
        task_id, attempt = record.get("task_id"), record.get("attempt")
        if not isinstance(task_id, str) or not isinstance(record.get("completion"), str) \
                or isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise GenerateInputError(f"{path}:{n}: expected 'task_id' (string), 'attempt' (integer >= 0) and "
                                     "'completion' (string)")
        if (task_id, attempt) in seen:
            raise GenerateInputError(f"{path}:{n}: attempt {attempt} of task {task_id!r} appears twice")
        seen.add((task_id, attempt))
        records.append({**record, "line": n})
    return records


def completion_text(episode) -> str:
    """The assistant turns the episode ran, joined: replaying it runs the same code blocks in the same order."""
    texts = episode.assistant_texts
    if episode.finish_reason == "truncated":
        texts = texts[:-1]  # cut by the token cap before its end-of-turn token: the episode did not run it
    return "\n\n".join(texts)


def episode_record(job: Job, episode, prompt: list[dict[str, str]]) -> dict[str, Any]:
    record: dict[str, Any] = {"task_id": job.task_id, "attempt": job.attempt, "completion": completion_text(episode)}
    if job.augmentation is not None:
        record["augmentation"] = job.augmentation
    record.update(
        finish_reason=episode.finish_reason,
        num_turns=len(episode.assistant_texts),
        num_model_tokens=episode.num_model_tokens,
        outcome=episode.outcome.to_dict(),
        messages=prompt + episode.messages(),
        final_observation=episode.final_observation,
    )
    return record


def attempt_augmentation(seed: int, task_id: str, attempt: int):
    """The random augmentation of one attempt; the same on every rerun (resuming regenerates the same copies)."""
    from arc_trl.data.augment import random_augmentation

    return random_augmentation(random.Random(f"{seed}:{task_id}:{attempt}"))


def plan_jobs(tasks: list[ArcTask], n: int, done: set[tuple[str, int]], augment: bool, seed: int) -> list[Job]:
    """The missing attempts, task by task (the attempts of a task share a batch: prefix caching)."""
    jobs = []
    for task in tasks:
        for attempt in range(n):
            if (task.id, attempt) in done:
                continue
            if augment:
                aug = attempt_augmentation(seed, task.id, attempt)
                jobs.append(Job(task.id, attempt, aug.apply_task(task), aug.to_string()))
            else:
                jobs.append(Job(task.id, attempt, task, None))
    return jobs
