"""What `arc-trl view` shows, read from disk: an evaluation folder or a training run's rollout dumps, as tasks with
their attempts.

Sources (`load_source`):

- an evaluation folder (`completions.jsonl`, with `per_attempt.jsonl` and `metrics.json` when it was scored): the
  attempts are the completions, joined by (task, attempt) to their scored rows (predictions, expected grids,
  verdicts, pixel scores); the tasks come from the folder's dataset (`metrics.json` / `sampling.json`, or
  `--dataset`);
- a completions file of the same format (e.g. a run's `eval_arc/step_NNNNNN.jsonl`), scored rows absent;
- a training run's folder, its `rollouts/` folder or one `step_NNNNNN.jsonl` dump: one attempt per dumped episode,
  the task (and its verdicts) from the dump itself, or from `--dataset` for dumps that predate them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask, Grid
from arc_trl.eval.error_kinds import attempt_kind

COMPLETIONS_FILE = "completions.jsonl"
PER_ATTEMPT_FILE = "per_attempt.jsonl"
METRICS_FILE = "metrics.json"
SAMPLING_FILE = "sampling.json"
DUMP_NAME = re.compile(r"step_(\d+)\.jsonl$")


class ViewInputError(ValueError):
    """The path is not something `arc-trl view` can read."""


@dataclass
class Turn:
    """One assistant message and the sandbox's reply to it (`shown`: whether the model saw that reply)."""

    text: str
    output: str | None
    shown: bool = True


@dataclass
class AttemptView:
    label: str
    turns: list[Turn]
    kind: str  # arc_trl.eval.error_kinds.attempt_kind
    passed: bool | None = None
    predictions: list[Grid | None] = field(default_factory=list)
    expected: list[Grid | None] | None = None  # in the frame the attempt saw (its augmentation's, if any)
    test_correct: list[bool] | None = None
    test_pixel: list[float] | None = None
    finish_reason: str | None = None
    error_kind: str | None = None
    status: str | None = None
    reward: float | None = None
    reward_parts: dict[str, float | None] | None = None
    advantage: float | None = None
    model_tokens: int | None = None
    augmentation: str | None = None

    @property
    def pixel(self) -> float | None:
        return sum(self.test_pixel) / len(self.test_pixel) if self.test_pixel else None


@dataclass
class TaskView:
    task_id: str
    task: ArcTask | None
    attempts: list[AttemptView] = field(default_factory=list)

    @property
    def solved(self) -> bool | None:
        known = [a.passed for a in self.attempts if a.passed is not None]
        return any(known) if known else None

    @property
    def n_passed(self) -> int:
        return sum(bool(a.passed) for a in self.attempts)

    @property
    def best_pixel(self) -> float | None:
        values = [a.pixel for a in self.attempts if a.pixel is not None]
        return max(values) if values else None

    def kind_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for a in self.attempts:
            counts[a.kind] = counts.get(a.kind, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: -item[1]))

    @property
    def mean_turns(self) -> float:
        return sum(len(a.turns) for a in self.attempts) / len(self.attempts) if self.attempts else 0.0

    @property
    def mean_tokens(self) -> float | None:
        values = [a.model_tokens for a in self.attempts if a.model_tokens is not None]
        return sum(values) / len(values) if values else None


@dataclass
class Source:
    """What was read: its tasks in order, a title, the kind of source, and the metrics of a scored folder."""

    title: str
    kind: str  # "evaluation", "completions" or "rollouts"
    tasks: list[TaskView]
    dataset: str | None = None
    metrics: dict[str, Any] | None = None
    eval_dir: Path | None = None
    notes: list[str] = field(default_factory=list)
    dataset_tasks: list[ArcTask] = field(default_factory=list)  # the whole dataset, when it was loaded


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a file, skipping blank lines and a torn last line."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a crash
            if isinstance(record, dict):
                yield record


def conversation_turns(messages: list[dict[str, Any]] | None, final_output: str | None,
                       fallback_text: str | None = None) -> list[Turn]:
    """The assistant turns of a conversation, each with the user message after it (the sandbox's reply); the last
    turn's reply is `final_output` (never shown to the model) when the conversation ends with the assistant."""
    messages = [m for m in messages or [] if isinstance(m, dict)]
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
    if first is None:
        return [Turn(fallback_text, final_output, shown=False)] if fallback_text else []
    turns: list[Turn] = []
    for m in messages[first:]:
        content = m.get("content") if isinstance(m.get("content"), str) else str(m.get("content"))
        if m.get("role") == "assistant":
            turns.append(Turn(content, None))
        elif turns and turns[-1].output is None:
            turns[-1].output = content
    if turns and turns[-1].output is None:
        turns[-1].output, turns[-1].shown = final_output, False
    return turns


def _task_index(tasks: Iterable[ArcTask] | None) -> dict[str, ArcTask]:
    return {t.id: t for t in tasks or []}


def load_dataset(spec: str | None, notes: list[str]) -> dict[str, ArcTask]:
    """The dataset's tasks by id, or {} (with a note) when there is no spec or it cannot be loaded."""
    if not spec:
        return {}
    from arc_trl.tasks import load_tasks

    try:
        return _task_index(load_tasks(spec))
    except Exception as e:  # noqa: BLE001  the report is still useful without the task grids
        notes.append(f"dataset {spec!r} could not be loaded ({type(e).__name__}: {e}); train pairs not shown")
        return {}


def _dataset_of(folder: Path) -> str | None:
    for name in (METRICS_FILE, SAMPLING_FILE):
        path = folder / name
        if path.is_file():
            try:
                value = json.loads(path.read_text()).get("dataset")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(value, str):
                return value
    return None


def _original_id(task_id: str) -> str:
    from arc_trl.eval.voting import record_origin

    return record_origin({"task_id": task_id})[0]


def completion_attempt(record: dict[str, Any], row: dict[str, Any] | None, task: ArcTask | None) -> AttemptView:
    """An evaluation attempt from its completions line and its scored row (None: not scored)."""
    from arc_trl.eval.score import score_attempt
    from arc_trl.rewards.outcome import AttemptOutcome

    outcome = record.get("outcome") if isinstance(record.get("outcome"), dict) else {}
    if row is None and task is not None and outcome and not record.get("augmentation"):
        row = score_attempt(task, AttemptOutcome.from_dict(outcome))  # the episode's own outcome, unreplayed
    row = row or {}
    expected = row.get("test_outputs", task.test_outputs if task is not None and not record.get("augmentation")
                      else None)
    return AttemptView(
        label=f"attempt {record.get('attempt', '?')}",
        turns=conversation_turns(record.get("messages"), record.get("final_observation"), record.get("completion")),
        kind=attempt_kind(row.get("passed"), row.get("valid_outputs", bool(outcome.get("submitted"))),
                          record.get("finish_reason"), row.get("code_found", outcome.get("code_found", True)),
                          row.get("error_kind", outcome.get("error_kind"))),
        passed=row.get("passed"),
        predictions=list(row.get("test_predictions") or outcome.get("test_predictions") or []),
        expected=expected,
        test_correct=row.get("test_correct"),
        test_pixel=row.get("test_pixel"),
        finish_reason=record.get("finish_reason"),
        error_kind=row.get("error_kind", outcome.get("error_kind")),
        status=row.get("status"),
        model_tokens=record.get("num_model_tokens"),
        augmentation=record.get("augmentation") or None,
    )


def load_completions(path: Path, per_attempt: Path | None, dataset: dict[str, ArcTask]) -> list[TaskView]:
    """Tasks with their attempts from a completions file (and its scored rows), in the file's order of tasks."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    if per_attempt is not None and per_attempt.is_file():
        for row in read_jsonl(per_attempt):
            rows[(_original_id(str(row.get("task_id"))), row.get("attempt"))] = row
    by_task: dict[str, TaskView] = {}
    for record in read_jsonl(path):
        task_id = _original_id(str(record.get("task_id")))
        view = by_task.setdefault(task_id, TaskView(task_id, dataset.get(task_id)))
        view.attempts.append(completion_attempt(record, rows.get((task_id, record.get("attempt"))), view.task))
    return list(by_task.values())


def dump_attempt(record: dict[str, Any], step: int, task: ArcTask | None) -> AttemptView:
    """A training episode from its dump record (old dumps: verdicts computed from its outcome and `task`)."""
    from arc_trl.eval.score import score_attempt
    from arc_trl.rewards.outcome import AttemptOutcome

    outcome = record.get("outcome") if isinstance(record.get("outcome"), dict) else {}
    verdicts = {k: record[k] for k in ("test_outputs", "test_correct", "test_pixel", "passed") if k in record}
    if not verdicts and task is not None:
        verdicts = score_attempt(task, AttemptOutcome.from_dict(outcome))
    predictions = list(outcome.get("test_predictions") or [])
    valid = bool(predictions) and all(p is not None for p in predictions)
    turns = conversation_turns(record.get("messages"), record.get("final_observation"), record.get("text"))
    return AttemptView(
        label=f"step {step} · episode {record.get('index', '?')}",
        turns=turns,
        kind=attempt_kind(verdicts.get("passed"), valid, record.get("finish_reason"),
                          bool(outcome.get("code_found")), outcome.get("error_kind")),
        passed=verdicts.get("passed"),
        predictions=predictions,
        expected=verdicts.get("test_outputs"),
        test_correct=verdicts.get("test_correct"),
        test_pixel=verdicts.get("test_pixel"),
        finish_reason=record.get("finish_reason"),
        error_kind=outcome.get("error_kind"),
        reward=record.get("reward"),
        reward_parts=record.get("reward_parts"),
        advantage=record.get("advantage") if isinstance(record.get("advantage"), (int, float)) else None,
        model_tokens=record.get("num_model_tokens", sum(record["env_mask"]) if record.get("env_mask") else None),
    )


def dump_files(path: Path) -> list[Path]:
    """The rollout dumps under a run folder, a rollouts folder or a single dump, in step order."""
    if path.is_file():
        return [path]
    folder = path / "rollouts" if (path / "rollouts").is_dir() else path
    return sorted((p for p in folder.glob("step_*.jsonl") if DUMP_NAME.search(p.name)),
                  key=lambda p: int(DUMP_NAME.search(p.name).group(1)))


def load_dumps(files: list[Path], dataset: dict[str, ArcTask]) -> list[TaskView]:
    by_task: dict[str, TaskView] = {}
    for path in files:
        file_step = int(DUMP_NAME.search(path.name).group(1)) if DUMP_NAME.search(path.name) else 0
        for record in read_jsonl(path):
            task_id = str(record.get("task_id"))
            task = dataset.get(task_id)
            if task is None and isinstance(record.get("task"), dict):
                try:
                    task = ArcTask.from_json(task_id, record["task"], source=str(path))
                except ValueError:
                    task = None
            view = by_task.setdefault(task_id, TaskView(task_id, task))
            view.task = view.task or task
            view.attempts.append(dump_attempt(record, int(record.get("step", file_step)), view.task))
    return list(by_task.values())


def _is_dump(path: Path) -> bool:
    return bool(DUMP_NAME.search(path.name)) and path.parent.name == "rollouts"


def load_source(path: str | Path, dataset: str | None = None) -> Source:
    """Read an evaluation folder, a completions file or a run's rollout dumps (module docstring)."""
    path = Path(path)
    notes: list[str] = []
    if not path.exists():
        raise ViewInputError(f"{path}: no such file or folder")
    if path.is_dir() and (path / COMPLETIONS_FILE).is_file():
        spec = dataset or _dataset_of(path)
        metrics_path = path / METRICS_FILE
        metrics = json.loads(metrics_path.read_text()) if metrics_path.is_file() else None
        if metrics is None:
            notes.append("not scored yet (no metrics.json): verdicts from the episodes' own outcomes")
        dataset_tasks = load_dataset(spec, notes)
        tasks = load_completions(path / COMPLETIONS_FILE, path / PER_ATTEMPT_FILE, dataset_tasks)
        return Source(path.resolve().name, "evaluation", tasks, spec, metrics, path, notes,
                      list(dataset_tasks.values()))
    files = dump_files(path) if (path.is_dir() or _is_dump(path)) else []
    if files:
        tasks = load_dumps(files, load_dataset(dataset, notes))
        run = path.parent.parent if path.is_file() else (path if (path / "rollouts").is_dir() else path.parent)
        return Source(f"{run.resolve().name}: rollouts", "rollouts", tasks, dataset, None, None, notes)
    if path.is_file():
        tasks = load_completions(path, None, load_dataset(dataset, notes))
        return Source(path.name, "completions", tasks, dataset, None, None, notes)
    raise ViewInputError(f"{path}: neither an evaluation folder (completions.jsonl), a completions file, nor a run's "
                         "rollout dumps (rollouts/step_NNNNNN.jsonl)")
