"""SFT transcripts from evaluation folders (`arc-trl evaluate generate` output): a model's own episodes that solved
their task, and its programs relabelled in hindsight (`arc_trl.warmstart.hindsight`).

    arc-trl transcripts --eval-dir runs/zero-shot/train --dataset arc-agi-1/train --out transcripts.jsonl \
        --prompt-template configs/prompts/coder-repl.yaml
    arc-trl sft --config ... --transcripts transcripts.jsonl

Each row is `{"messages": [...], "task_id", "kind", "source"}`, the conversation rendered with the given prompt
template (the one the warm-started model will be evaluated with):

- `solved`: an attempt that got every test output right (`per_attempt.jsonl`'s `passed`): its own turns and the
  environment's replies, as played.
- `hindsight`: an attempt whose code left a `transform` that gave a grid for every input (`source` "transform")
  but did not solve the task: the relabelled task (the program's outputs as the task's outputs) and one assistant
  turn holding the attempt's code blocks in one ```python block. Replayed on the relabelled task before it is kept:
  it must reproduce every output it defines (a program that reads `train_outputs` or draws random numbers is
  dropped).

Attempts on augmented copies are skipped (counted), and so are repeats: one row per (task, kind, outputs). The test
outputs of the original task are read only to know which attempts solved it; a hindsight row never holds them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arc_trl.data.prompts import render_messages
from arc_trl.data.task import ArcTask
from arc_trl.warmstart.hindsight import relabel

KINDS = ("solved", "hindsight")


class TranscriptError(ValueError):
    """An evaluation folder that cannot give transcripts; the message names the file and the reason."""


@dataclass
class TranscriptReport:
    kept: Counter = field(default_factory=Counter)  # kind -> rows
    skipped: Counter = field(default_factory=Counter)  # reason -> attempts
    tasks: dict[str, set[str]] = field(default_factory=dict)  # kind -> original task ids

    def summary(self) -> dict[str, Any]:
        return {"kept": dict(self.kept), "skipped": dict(sorted(self.skipped.items())),
                "tasks": {kind: len(ids) for kind, ids in self.tasks.items()}}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise TranscriptError(f"{path}: no such file (an `arc-trl evaluate generate` folder, scored, holds it)")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise TranscriptError(f"{path}:{n}: not valid JSON ({e.msg})") from None
    return rows


def _code_turn(completion: str, mode: str) -> str | None:
    from arc_trl.sandbox.code_blocks import extract_code_blocks, extract_program

    code = extract_program(completion) if mode == "program" else "\n\n".join(extract_code_blocks(completion))
    return f"```python\n{code.strip()}\n```" if code and code.strip() else None


def _played_turns(record: dict[str, Any], where: str) -> list[dict[str, str]]:
    messages = record.get("messages")
    if not isinstance(messages, list) or len(messages) < 3 or [m.get("role") for m in messages[:2]] != [
            "system", "user"]:
        raise TranscriptError(f"{where}: attempt {record.get('attempt')} of {record.get('task_id')!r} has no "
                              "'messages' [system, user, ...] (written by `arc-trl evaluate generate`)")
    turns = [{"role": m["role"], "content": m["content"]} for m in messages[2:]]
    while turns and turns[-1]["role"] != "assistant":
        turns.pop()
    return turns


def candidate_rows(eval_dir: str | Path, tasks: dict[str, ArcTask], mode: str, template,
                   report: TranscriptReport, skip_ids: frozenset[str] = frozenset()
                   ) -> Iterable[tuple[dict[str, Any], ArcTask | None]]:
    """(row, the relabelled task to replay it on, or None for a solved row) for each usable attempt of a folder
    (attempts at `skip_ids`, held-out tasks, counted and left out)."""
    folder = Path(eval_dir)
    scored = {(r["task_id"], r["attempt"]): r for r in _read_jsonl(folder / "per_attempt.jsonl")}
    for record in _read_jsonl(folder / "completions.jsonl"):
        key = (record["task_id"], record["attempt"])
        where = f"{folder / 'completions.jsonl'}"
        if record["task_id"] in skip_ids:
            report.skipped["held_out"] += 1
            continue
        task = tasks.get(record["task_id"])
        if task is None:
            raise TranscriptError(f"{where}: task {record['task_id']!r} is not in the dataset given (--dataset)")
        row = scored.get(key)
        if row is None:
            report.skipped["not_scored"] += 1
            continue
        if record.get("augmentation"):
            report.skipped["augmented"] += 1
            continue
        source = f"{folder.name}/{record['task_id']}/{record['attempt']}"
        if row.get("passed"):
            messages = render_messages(task, mode, template) + _played_turns(record, where)
            yield {"messages": messages, "task_id": task.id, "kind": "solved", "source": source,
                   "outputs": row.get("test_predictions")}, None
            continue
        if row.get("source") != "transform":
            report.skipped["no_transform"] += 1
            continue
        relabelled, reason = relabel(task, row.get("train_predictions"), row.get("test_predictions"),
                                     f"h{record['attempt']}")
        if relabelled is None:
            report.skipped[reason] += 1
            continue
        turn = _code_turn(record["completion"], mode)
        if turn is None:
            report.skipped["no_code"] += 1
            continue
        messages = render_messages(relabelled, mode, template) + [{"role": "assistant", "content": turn}]
        yield {"messages": messages, "task_id": task.id, "kind": "hindsight", "source": source,
               "outputs": [p.output for p in relabelled.train] + list(relabelled.test_outputs)}, relabelled


def build_transcripts(eval_dirs: list[str | Path], tasks: list[ArcTask], mode: str, template=None, pool=None,
                      kinds: tuple[str, ...] = KINDS, max_per_task: int | None = None,
                      skip_ids: frozenset[str] = frozenset()) -> tuple[list[dict[str, Any]], TranscriptReport]:
    """The transcripts of `eval_dirs` (see the module docstring); `pool`: a SandboxPool for the hindsight replays.
    `max_per_task`: at most this many rows of each kind per original task (the first ones in folder order);
    `skip_ids`: tasks held out (validation tasks that choices are made on), never in a row."""
    from arc_trl.sandbox.replay import replay_attempt

    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise TranscriptError(f"kinds must be among {list(KINDS)}, got {unknown}")
    by_id = {t.id: t for t in tasks}
    report = TranscriptReport()
    seen: set[tuple[str, str, str]] = set()
    per_task: Counter = Counter()
    candidates = []
    for eval_dir in eval_dirs:
        for row, relabelled in candidate_rows(eval_dir, by_id, mode, template, report, frozenset(skip_ids)):
            if row["kind"] not in kinds:
                report.skipped[f"{row['kind']}_not_asked"] += 1
                continue
            key = (row["task_id"], row["kind"], json.dumps(row.pop("outputs")))
            if key in seen:
                report.skipped["repeat"] += 1
                continue
            seen.add(key)
            candidates.append((row, relabelled))

    def reproduces(item: tuple[dict[str, Any], ArcTask | None]) -> bool:
        row, relabelled = item
        if relabelled is None:
            return True
        outcome = replay_attempt(pool, relabelled, row["messages"][-1]["content"], mode="auto")
        return (outcome.train_predictions == [p.output for p in relabelled.train]
                and outcome.test_predictions == relabelled.test_outputs)

    if any(relabelled is not None for _, relabelled in candidates) and (pool is None or pool.config.check_transform):
        raise TranscriptError("hindsight rows are replayed before they are kept: pass a SandboxPool without "
                              "check_transform (its replays report what the code leaves, not what a check submits)")
    workers = pool.num_workers if pool is not None else 1
    with ThreadPoolExecutor(max(1, workers)) as executor:
        verdicts = list(executor.map(reproduces, candidates))
    rows = []
    for (row, _), ok in zip(candidates, verdicts, strict=True):
        if not ok:
            report.skipped["not_reproduced"] += 1
            continue
        if max_per_task is not None and per_task[row["task_id"], row["kind"]] >= max_per_task:
            report.skipped["over_max_per_task"] += 1  # counted after the replay: a dropped row frees a place
            continue
        per_task[row["task_id"], row["kind"]] += 1
        rows.append(row)
        report.kept[row["kind"]] += 1
        report.tasks.setdefault(row["kind"], set()).add(row["task_id"])
    return rows, report


def write_transcripts(rows: list[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    tmp.replace(path)
    return path


def read_transcripts(paths: list[str | Path]) -> list[dict[str, Any]]:
    """Rows of transcript files (each line a JSON object with a `messages` list of role/content turns that ends with
    an assistant turn); TranscriptError naming the file and line otherwise."""
    rows = []
    for path in map(Path, paths):
        for n, row in enumerate(_read_jsonl(path), start=1):
            messages = row.get("messages") if isinstance(row, dict) else None
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("content"), str)
                    and m.get("role") in ("system", "user", "assistant") for m in messages) \
                    or messages[-1]["role"] != "assistant":
                raise TranscriptError(f"{path}:{n}: expected {{'messages': [{{'role', 'content'}}, ...]}} ending "
                                      "with an assistant turn")
            rows.append({"messages": messages, "task_id": str(row.get("task_id", "")),
                         "kind": str(row.get("kind", ""))})
    return rows
