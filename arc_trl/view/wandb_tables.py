"""W&B tables a researcher can read: episodes with their grids as images (`grids.grid_rgb`, the report's palette and
marks), code, output and reward; per-task evaluation outcomes; collapse-guard events.

Every function is a no-op without an active W&B run (`wandb.run is None`: `report_to` without wandb, or another
process than the main one), so callers need no check of their own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from arc_trl.eval.error_kinds import attempt_kind
from arc_trl.view.grids import grid_rgb

EPISODE_COLUMNS = ["step", "task_id", "kind", "reward", "reward_parts", "advantage", "finish_reason", "turns",
                   "model_tokens", "test_input", "submitted", "expected", "code", "output"]
TASK_COLUMNS = ["step", "task_id", "attempts", "passed", "pass_rate", "best_pixel", "mean_reward", "kinds",
                "test_input", "expected"]
EVENT_COLUMNS = ["step", "event", "label", "attempt", "detail"]
MAX_TEXT = 4000  # characters of code or output per cell


def active_run():
    """The current W&B run, or None (wandb not imported, so not initialised, or not this process's run). Looked up
    without importing wandb: a run that does not report to W&B never pays its import."""
    wandb = sys.modules.get("wandb")
    return None if wandb is None else getattr(wandb, "run", None)


def _image(grid, expected=None):
    import wandb

    if not grid or not isinstance(grid, list) or not all(isinstance(row, list) and row for row in grid):
        return None
    return wandb.Image(grid_rgb(grid, expected))


def _cut(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"\n[... {len(text) - MAX_TEXT} more characters]"


def episode_row(record: dict[str, Any]) -> list[Any]:
    """A table row from a rollout-dump record (`arc_trl.trainer.rollout_dump.episode_dump`)."""
    outcome = record.get("outcome") or {}
    predictions = outcome.get("test_predictions") or []
    expected = record.get("test_outputs") or []
    task = record.get("task") or {}
    test_input = (task.get("test") or [{}])[0].get("input")
    assistant = [m["content"] for m in record.get("messages") or [] if m.get("role") == "assistant"]
    outputs = [m["content"] for m in record.get("messages") or [] if m.get("role") == "user"]
    if record.get("final_observation") is not None:
        outputs.append(record["final_observation"])
    valid = bool(predictions) and all(p is not None for p in predictions)
    kind = attempt_kind(record.get("passed"), valid, record.get("finish_reason"), bool(outcome.get("code_found")),
                        outcome.get("error_kind"))
    return [record.get("step"), record.get("task_id"), kind, record.get("reward"),
            json.dumps(record.get("reward_parts") or {}), record.get("advantage"), record.get("finish_reason"),
            record.get("num_turns"), record.get("num_model_tokens"), _image(test_input),
            _image(predictions[0] if predictions else None, expected[0] if expected else None),
            _image(expected[0] if expected else None),
            _cut("\n\n# --- next turn ---\n\n".join(assistant)), _cut("\n\n--- next reply ---\n\n".join(outputs))]


def episodes_table(records: Sequence[dict[str, Any]]):
    import wandb

    return wandb.Table(columns=EPISODE_COLUMNS, data=[episode_row(r) for r in records])


def log_episodes(records: Sequence[dict[str, Any]], step: int, key: str = "rollouts/episodes") -> bool:
    """Log a table of episodes (dump records) at `step`; False when there is no active run."""
    run = active_run()
    if run is None or not records:
        return False
    run.log({key: episodes_table(records), "train/global_step": step})
    return True


def log_eval_tasks(tasks, results: Sequence[dict[str, Any]], step: int, key: str = "eval_arc/tasks") -> bool:
    """Log the in-training evaluation's per-task outcomes (`ArcEvalCallback` results: one dict per attempt with its
    `task` index, `passed`, `pixel`, `reward`, `kind`)."""
    run = active_run()
    if run is None or not results:
        return False
    import wandb
    by_task: dict[int, list[dict[str, Any]]] = {}
    for r in results:
        by_task.setdefault(r["task"], []).append(r)
    rows = []
    for index, attempts in sorted(by_task.items()):
        task = tasks[index]
        passed = [bool(a["passed"]) for a in attempts if a["passed"] is not None]
        pixels = [a["pixel"] for a in attempts if a.get("pixel") is not None]
        rewards = [a["reward"] for a in attempts if a.get("reward") is not None]
        kinds: dict[str, int] = {}
        for a in attempts:
            kinds[a.get("kind", "?")] = kinds.get(a.get("kind", "?"), 0) + 1
        rows.append([step, task.id, len(attempts), sum(passed), sum(passed) / len(passed) if passed else None,
                     max(pixels) if pixels else None, sum(rewards) / len(rewards) if rewards else None,
                     json.dumps(kinds), _image(task.test_inputs[0]),
                     _image(task.test_outputs[0]) if task.test_outputs else None])
    run.log({key: wandb.Table(columns=TASK_COLUMNS, data=rows), "train/global_step": step})
    return True


class EventTable:
    """Collapse-guard events (non-ok verdicts, collapses, rollbacks, rejected checkpoints) as one W&B table, logged
    again whole at each event (events are rare; a logged table cannot grow)."""

    def __init__(self, key: str = "collapse_guard/events") -> None:
        self.key = key
        self.rows: list[list[Any]] = []

    def add(self, record: dict[str, Any]) -> bool:
        run = active_run()
        if run is None or not _worth_a_row(record):
            return False
        import wandb
        detail = record.get("reasons") or record.get("fired") or record.get("resume_from") or record.get("checkpoint")
        self.rows.append([record.get("step"), record.get("event"), record.get("label"), record.get("attempt"),
                          detail if isinstance(detail, str) else json.dumps(detail)])
        run.log({self.key: wandb.Table(columns=EVENT_COLUMNS, data=list(self.rows))})
        return True


def _worth_a_row(record: dict[str, Any]) -> bool:
    event = record.get("event")
    if event == "step":
        return record.get("label") not in (None, "ok")
    if event == "checkpoint":
        return record.get("label") == "rejected"
    return event not in ("save",)


def log_eval_folder(eval_dir, project: str, tasks=None, entity: str | None = None) -> dict[str, Any] | None:
    """An evaluation folder as a W&B run of its own (`evaluate generate --wandb-project`): the pass figures, the
    Kaggle score and the attempt kinds, one table row per task with its test input, expected and best submitted
    grid; `wandb/` under the folder. Returns {"dir": the run's files, "metrics": the figures logged} (None when
    wandb is not installed)."""
    from pathlib import Path

    try:
        import wandb
    except ImportError:
        return None
    from arc_trl.eval.passk import read_per_attempt
    from arc_trl.eval.summary import summarise_folder
    from arc_trl.eval.voting import record_origin

    eval_dir = Path(eval_dir)
    summary = summarise_folder(eval_dir, tasks)
    config = {}
    if (eval_dir / "sampling.json").is_file():
        sampling = json.loads((eval_dir / "sampling.json").read_text())
        config = {"dataset": sampling.get("dataset"), **(sampling.get("settings") or {})}
    best: dict[str, dict[str, Any]] = {}
    for row in read_per_attempt(eval_dir):
        pixels = row.get("test_pixel") or []
        score = (bool(row.get("passed")), sum(pixels) / len(pixels) if pixels else -1.0)
        task_id = record_origin(row)[0]
        if task_id not in best or score > best[task_id]["score"]:
            best[task_id] = {"score": score, "row": row}
    by_id = {t.id: t for t in tasks or []}
    data = []
    for t in summary.per_task:
        row = best.get(t["task_id"], {}).get("row") or {}
        predictions, expected = row.get("test_predictions") or [], row.get("test_outputs") or []
        task = by_id.get(t["task_id"])
        data.append([t["task_id"], t["attempts"], t["passed"], t["best_pixel"], json.dumps(t["kinds"]),
                     _image(task.test_inputs[0]) if task else None,
                     _image(predictions[0] if predictions else None, expected[0] if expected else None),
                     _image(expected[0] if expected else None)])
    run = wandb.init(project=project, entity=entity, dir=str(eval_dir), name=eval_dir.resolve().name,
                     job_type="evaluation", config=config, reinit="create_new")
    metrics: dict[str, Any] = {f"eval/pass@{k}": v for k, v in summary.pass_at.items()}
    if summary.kaggle is not None:
        metrics["eval/kaggle"] = summary.kaggle
    metrics.update({f"eval/attempts/{kind.replace(' ', '_')}": n for kind, n in summary.kinds.items()})
    metrics["eval/tasks"] = wandb.Table(columns=["task_id", "attempts", "passed", "best_pixel", "kinds",
                                                 "test_input", "best_submitted", "expected"], data=data)
    run.log(metrics)
    folder = run.dir
    run.finish()
    return {"dir": folder, "metrics": {k: v for k, v in metrics.items() if k != "eval/tasks"}}
