"""The code-model experiment's committed records and the summary computed from them.

`slim` turns the machine's evaluation folders (WORK/harness, zero-shot, warm) into what is committed under
results/coder/: per folder `metrics.json`, `pass_at_k.json`, `sampling.json`, `per_attempt.jsonl.gz` (every field of
arc-trl evaluate score's per-attempt file but the grids: each prediction set becomes its sha256, which is all that
`unique_outputs` needs) and `solved.jsonl` (the completions of the attempts that passed); the experiment's
choice.json, timeline.jsonl, speed.json and the models' import records beside them.

`summary` recomputes, from those files only, every table of docs/pretrained.md (the research log's columns per
folder, pass@1/2/8 with the unbiased estimator, the harness arms and the warm starts against the default prompt and
the zero-shot model paired by task, the transcripts' counts): results/coder_summary.json
(`python -m arc_experiments.figures coder`; `--check` compares).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from arc_experiments.coder.runs import run_figures, slim_runs

FOLDER_FILES = ("metrics.json", "pass_at_k.json", "sampling.json")
TOP_FILES = ("choice.json", "speed.json")
TIMELINE = "timeline.jsonl"
GRID_FIELDS = ("test_predictions", "train_predictions")
DATASET_METRICS = ("pass_rate", "is_correct")  # arc_trl.eval.score's: over the dataset, unattempted tasks failed
KS = (1, 2, 8)
TABLE = ("valid_code", "valid_outputs", "unique_outputs", "train_pixel_score", "train_correct_grids",
         "train_pass_rate", "pixel_score", "correct_grids", "pass_rate", "is_correct")


def prediction_key(row: dict[str, Any]) -> str | None:
    """The sha256 of a valid prediction set (what makes two attempts' outputs the same), None without one."""
    if not row.get("valid_outputs"):
        return None
    return hashlib.sha256(json.dumps(row["test_predictions"], separators=(",", ":")).encode()).hexdigest()[:16]


def slim_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            row["prediction_key"] = prediction_key(row)
            rows.append({k: v for k, v in row.items() if k not in GRID_FIELDS})
    return rows


def eval_folders(work: Path) -> list[Path]:
    """The scored evaluation folders under WORK (relative order: harness, zero-shot, warm)."""
    return sorted(p.parent for p in work.glob("**/per_attempt.jsonl"))


def slim(work: Path, out: Path) -> list[Path]:
    """Write the committed form of WORK's records under `out`; the folders written."""
    written = []
    for folder in eval_folders(work):
        target = out / folder.relative_to(work)
        target.mkdir(parents=True, exist_ok=True)
        for name in FOLDER_FILES:
            if (folder / name).exists():
                shutil.copy2(folder / name, target / name)
        rows = slim_rows(folder / "per_attempt.jsonl")
        with gzip.open(target / "per_attempt.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
        passed = {(r["task_id"], r["attempt"]) for r in rows if r.get("passed")}
        records = [(line, json.loads(line)) for line in (folder / "completions.jsonl").read_text().splitlines()
                   if line.strip()]
        solved = [line for line, record in records if (record["task_id"], record["attempt"]) in passed]
        (target / "solved.jsonl").write_text("".join(line + "\n" for line in solved))
        written.append(target)
    for name in TOP_FILES:
        if (work / name).exists():
            shutil.copy2(work / name, out / name)
    if (work / TIMELINE).exists():  # every machine's timeline: the earlier machines' lines kept, the new ones after
        kept = _lines(out / TIMELINE)
        added = [x for x in _lines(work / TIMELINE) if x not in kept]
        (out / TIMELINE).write_text("".join(f"{x}\n" for x in kept + added))
    for record in work.glob("models/*/arc_trl_import.json"):
        (out / "models").mkdir(parents=True, exist_ok=True)
        shutil.copy2(record, out / "models" / f"{record.parent.name}.json")
    for transcripts in work.glob("warm/*/transcripts.jsonl"):
        kinds: dict[str, int] = {}
        tasks: dict[str, set[str]] = {}
        for line in transcripts.read_text().splitlines():
            row = json.loads(line)
            kinds[row["kind"]] = kinds.get(row["kind"], 0) + 1
            tasks.setdefault(row["kind"], set()).add(row["task_id"])
        (out / "warm" / transcripts.parent.name).mkdir(parents=True, exist_ok=True)
        (out / "warm" / transcripts.parent.name / "transcripts.json").write_text(json.dumps(
            {"rows": kinds, "tasks": {k: len(v) for k, v in tasks.items()}}, indent=1) + "\n")
    return written + slim_runs(work, out)  # issue 60's GRPO runs (runs.py)


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def read_slim(folder: Path) -> list[dict[str, Any]]:
    with gzip.open(folder / "per_attempt.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def folder_figures(folder: Path) -> dict[str, Any]:
    """A folder's table row from its committed per-attempt file: the research log's columns (arc-trl evaluate
    score's definitions, `arc_trl.eval.score.task_metrics`) and pass@k."""
    from statistics import fmean

    from arc_trl.data.augment import Augmentation
    from arc_trl.eval.passk import count_passes, pass_at_k_curve
    from arc_trl.eval.score import task_metrics

    rows = read_slim(folder)
    by_task: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row)
    per_task = []
    for task_rows in by_task.values():
        # task_metrics reads the grids only for unique_outputs: it gets none, and the sha256 keys count instead
        values = task_metrics([{**r, "valid_outputs": False} for r in task_rows], [Augmentation()] * len(task_rows))
        values["valid_outputs"] = fmean(float(r["valid_outputs"]) for r in task_rows)
        keys = {r["prediction_key"] for r in task_rows if r["prediction_key"] is not None}
        values["unique_outputs"] = len(keys) / len(task_rows)
        per_task.append(values)
    figures: dict[str, Any] = {"n_tasks": len(by_task), "n_attempts": len(rows)}
    for key in TABLE:
        present = [t[key] for t in per_task if t[key] is not None]
        figures[key] = fmean(present) if present else None
    # the pass figures over the whole dataset, as evaluate score writes them: an unattempted task is a failure
    dataset = json.loads((folder / "metrics.json").read_text()).get("n_dataset_tasks_with_solutions")
    dataset = dataset if dataset is not None else len(by_task)
    figures["n_dataset_tasks"] = dataset
    for key in DATASET_METRICS:
        if figures[key] is not None:
            figures[key] *= len(by_task) / dataset
    curve = pass_at_k_curve(count_passes(rows), ks=KS, dataset_tasks=dataset)
    figures["pass_at_k"] = curve["pass_at_k"]
    figures["solved_tasks"] = sorted(t for t, task_rows in by_task.items() if any(r.get("passed") for r in task_rows))
    sampling = json.loads((folder / "sampling.json").read_text())
    figures["tokens_per_s"] = [run.get("model_tokens_per_s") for run in sampling.get("runs", [])]
    figures["errors"] = error_kinds(rows)
    return figures


def error_kinds(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How attempts failed: no code, each coarse error kind, no valid output; passed ones are left out."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.get("passed"):
            continue
        kind = "no_code" if not row.get("code_found") else row.get("error_kind") or (
            "wrong_output" if row.get("valid_outputs") else "no_output")
        counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))


def paired_difference(a: Path, b: Path, key: str) -> dict[str, Any]:
    """Folder b's per-task mean of a per-attempt field minus folder a's, over the tasks both attempted: the mean and a
    95% t interval over tasks (one sample of attempts per task: no seed variance in it)."""
    from statistics import fmean, stdev

    from arc_experiments.learning.student_t import t_quantile

    def per_task(folder: Path) -> dict[str, float]:
        values: dict[str, list[float]] = {}
        for row in read_slim(folder):
            values.setdefault(row["task_id"], []).append(float(bool(row.get(key))))
        return {task: fmean(v) for task, v in values.items()}

    left, right = per_task(a), per_task(b)
    diffs = [right[t] - left[t] for t in sorted(set(left) & set(right))]
    mean = fmean(diffs)
    half = t_quantile(0.975, len(diffs) - 1) * stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
    return {"tasks": len(diffs), "mean": round(mean, 6), "ci95": [round(mean - half, 6), round(mean + half, 6)]}


def solved_overlap(a: Path, b: Path) -> dict[str, int]:
    """Tasks solved (any attempt passed) by folder a alone, by b alone, by both."""
    def solved(folder: Path) -> set[str]:
        return {row["task_id"] for row in read_slim(folder) if row.get("passed")}

    left, right = solved(a), solved(b)
    return {"first_only": len(left - right), "second_only": len(right - left), "both": len(left & right)}


def summary(root: Path) -> dict[str, Any]:
    """results/coder_summary.json from results/coder/ (see the module docstring)."""
    base = root / "results" / "coder"
    folders = sorted(p.parent for p in base.glob("**/per_attempt.jsonl.gz"))  # reruns/DATE/... included
    if not folders:
        raise FileNotFoundError(f"{base}: no per_attempt.jsonl.gz")
    out: dict[str, Any] = {"folders": {str(f.relative_to(base)): folder_figures(f) for f in folders}}
    harness = sorted(p for p in base.glob("harness/*/default") if (p / "per_attempt.jsonl.gz").exists())
    out["harness_vs_default"] = {  # each arm minus the default prompt, paired by task
        str(arm.relative_to(base)): {key: paired_difference(default, arm, key) for key in ("valid_outputs", "passed")}
        for default in harness for arm in sorted(default.parent.iterdir())
        if arm != default and (arm / "per_attempt.jsonl.gz").exists()}
    out["warm_vs_zero_shot"] = {  # the warm-started model minus the same model zero-shot, paired by task
        str(warm.relative_to(base)): {key: paired_difference(zero, warm, key) for key in ("valid_outputs", "passed")}
        for warm in sorted(base.glob("warm/*/*")) if (warm / "per_attempt.jsonl.gz").exists()
        for zero in [base / "zero-shot" / warm.parent.name / warm.name] if (zero / "per_attempt.jsonl.gz").exists()}
    out["qwen15_vs_qwen05"] = {  # the 1.5B minus the 0.5B, both warm-started, paired by task: the OPD issue's gap
        str(big.relative_to(base)): {"solved_tasks": solved_overlap(small, big),
                                     **{key: paired_difference(small, big, key) for key in ("valid_outputs", "passed")}}
        for big in sorted(base.glob("warm/qwen15/*")) if (big / "per_attempt.jsonl.gz").exists()
        for small in [base / "warm" / "qwen05" / big.name] if (small / "per_attempt.jsonl.gz").exists()}
    runs = sorted(p.parent for p in base.glob("**/grpo/*/steps.jsonl"))  # issue 60's runs, sessions/DATE/grpo/RUN
    out["grpo"] = {str(run.relative_to(base)): run_figures(run) for run in runs}
    out["grpo_vs_warm"] = {  # a run's adapter minus the warm 0.5B it started from (the same session's), by task
        str((run / split).relative_to(base)): {
            "solved_tasks": solved_overlap(warm, run / split),
            **{key: paired_difference(warm, run / split, key) for key in ("valid_outputs", "passed")}}
        for run in runs for split in ("validation", "eval")
        for warm in [run.parent.parent / "warm" / "qwen05" / split]
        if (run / split / "per_attempt.jsonl.gz").exists() and (warm / "per_attempt.jsonl.gz").exists()}
    out["reruns"] = {}  # a folder generated again on a later machine (same seed, harness, model) minus the first one
    for again in sorted(p.parent for p in base.glob("reruns/*/**/per_attempt.jsonl.gz")):
        first = base.joinpath(*again.relative_to(base).parts[2:])  # reruns/DATE/zero-shot/... -> zero-shot/...
        if (first / "per_attempt.jsonl.gz").exists():
            out["reruns"][str(again.relative_to(base))] = {
                "solved_tasks": solved_overlap(first, again),
                **{key: paired_difference(first, again, key) for key in ("valid_outputs", "passed")}}
    rerun_transcripts = {str(p.parent.relative_to(base)): json.loads(p.read_text())
                         for p in base.glob("reruns/*/warm/*/transcripts.json")}
    if rerun_transcripts:
        out["rerun_transcripts"] = rerun_transcripts
    for name in ("choice.json", "speed.json"):
        if (base / name).exists():
            out[name.removesuffix(".json")] = json.loads((base / name).read_text())
    transcripts = {p.parent.name: json.loads(p.read_text()) for p in base.glob("warm/*/transcripts.json")}
    if transcripts:
        out["transcripts"] = transcripts
    return out
