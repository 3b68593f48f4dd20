"""Choose a sweep's recipe on its validation tasks: rank the runs by the in-training evaluation's pass@1.

    python -m arc_experiments.learning.sweep_choice SWEEP_DIR [--out choice.json]

Reads `SWEEP_DIR/sweep_manifest.json` (scripts/sweep.py) and, for each run, every in-training evaluation
(`eval_every_steps`, arc_trl/eval/callback.py): the attempts files `output_dir/eval_arc/step_N.jsonl`, rescored against
the validation tasks (`eval_dataset` of the run's config) into per-task pass@1, with a bootstrap CI over tasks
(bootstrap.py: a candidate is one run, so its interval covers the choice of tasks only, not of seeds; figures over
several seeds take seed_interval.py's). Each (run, step) is a candidate (the step is part of the recipe); each gets the
paired difference to the best one; each variant and each arm (GRPO alone: `teacher_tau` 0; GRPO + OPD) gets its own
best. Runs without an evaluation (not finished, or no eval_dataset) are listed as such. Held-out tasks play no part: the
sweep's configs must evaluate on the validation set (see configs/gpu/learning/sweep.yaml).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from arc_experiments.learning.bootstrap import bootstrap_ci, paired_bootstrap

STEP_FILE = re.compile(r"step_(\d+)\.jsonl$")


def evaluations(output_dir: Path) -> list[tuple[int, Path]]:
    """(step, attempts file) of each of the run's in-training evaluations, by step."""
    return sorted((int(m.group(1)), p) for p in (output_dir / "eval_arc").glob("step_*.jsonl")
                  if (m := STEP_FILE.search(p.name)))


def last_evaluation(output_dir: Path) -> tuple[int, Path] | None:
    """(step, attempts file) of the run's last in-training evaluation, None when it has none."""
    found = evaluations(output_dir)
    return found[-1] if found else None


def attempt_counts(path: Path, dataset: str, tasks: dict | None = None) -> dict[str, tuple[int, int]]:
    """{task: (attempts, passed attempts)} of an in-training evaluation's attempts file (each outcome's test predictions
    against the task: passed when every test output is exact); `tasks`: the dataset's tasks by id, when loaded."""
    from arc_trl.tasks import load_tasks
    from arc_trl.rewards.scoring import exact_match

    tasks = tasks if tasks is not None else {t.id: t for t in load_tasks(dataset)}
    counts: dict[str, list[int]] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        task = tasks.get(record["task_id"])
        if task is None:
            raise ValueError(f"{path}: task {record['task_id']!r} is not in {dataset}")
        predictions = record["outcome"].get("test_predictions")
        passed = predictions is not None and len(predictions) == len(task.test_outputs) and all(
            p is not None and exact_match(p, t) for p, t in zip(predictions, task.test_outputs))
        n_c = counts.setdefault(task.id, [0, 0])
        n_c[0] += 1
        n_c[1] += int(passed)
    return {t: (n, c) for t, (n, c) in sorted(counts.items())}


def per_task_from_attempts(path: Path, dataset: str) -> dict[str, float]:
    """Per-task pass@1 of an in-training evaluation's attempts (`attempt_counts`)."""
    return {t: c / n for t, (n, c) in attempt_counts(path, dataset).items()}


def rank(sweep_dir: str | Path, n_resamples: int = 10_000) -> dict[str, Any]:
    """The runs ranked by validation pass@1 (module docstring), as saved by `--out`."""
    import yaml

    sweep_dir = Path(sweep_dir)
    manifest = json.loads((sweep_dir / "sweep_manifest.json").read_text())
    rows, missing = [], []
    for run in manifest["runs"]:
        output_dir = Path(run["output_dir"])
        config = yaml.safe_load(Path(run["config"]).read_text())
        found = evaluations(output_dir)
        dataset = config.get("eval_dataset")
        if not found or not dataset:
            missing.append(run["name"])
            continue
        evaluated = len(rows)
        for step, path in found:
            per_task = per_task_from_attempts(path, dataset)
            if not per_task:  # an evaluation that wrote nothing (stopped): no candidate
                continue
            ci = bootstrap_ci(per_task, n_resamples=n_resamples, name=f"{run['name']}@{step}")
            arm = "grpo-opd" if float(config.get("teacher_tau") or 0) > 0 else "grpo-only"
            rows.append({"name": run["name"], "variant": run.get("variant"), "arm": arm, "varied": run["varied"],
                         "step": step,
                         "validation_dataset": dataset, "pass1": ci["mean"], "pass1_ci95": ci["ci"],
                         "n_tasks": ci["n_tasks"], "per_task": per_task})
        if len(rows) == evaluated:
            missing.append(run["name"])
    rows.sort(key=lambda r: (-r["pass1"], r["step"]))  # a tie goes to the fewer steps
    for row in rows[1:]:
        diff = paired_bootstrap(rows[0]["per_task"], row["per_task"], n_resamples=n_resamples,
                                names=(rows[0]["name"], row["name"]))
        row["best_minus_this"], row["best_minus_this_ci95"] = diff["mean_diff"], diff["ci"]
    per_variant: dict[str, dict[str, Any]] = {}
    per_arm: dict[str, dict[str, Any]] = {}
    for row in rows:  # rows are ranked: the first of each variant (and arm) is its best
        best = {"name": row["name"], "step": row["step"], "pass1": row["pass1"], "varied": row["varied"]}
        per_variant.setdefault(str(row["variant"]), best)
        per_arm.setdefault(row["arm"], best)
    return {"sweep": manifest["name"], "best": rows[0]["name"] if rows else None,
            "best_step": rows[0]["step"] if rows else None, "best_values": rows[0]["varied"] if rows else None,
            "best_per_variant": per_variant, "best_per_arm": per_arm, "runs": rows, "not_evaluated": missing}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir")
    parser.add_argument("--out", help="write the ranking (JSON, per-task values included)")
    args = parser.parse_args(argv)
    result = rank(args.sweep_dir)
    for row in result["runs"]:
        lo, hi = row["pass1_ci95"]
        gap = ""
        if "best_minus_this" in row:
            g_lo, g_hi = row["best_minus_this_ci95"]
            gap = f"  best - this {100 * row['best_minus_this']:+.1f} [{100 * g_lo:+.1f}, {100 * g_hi:+.1f}] points"
        print(f"{row['name']:32s} step {row['step']:4d}  validation pass@1 {100 * row['pass1']:5.1f}% "
              f"[{100 * lo:.1f}, {100 * hi:.1f}] over {row['n_tasks']} tasks{gap}")
    if result["not_evaluated"]:
        print(f"not evaluated: {', '.join(result['not_evaluated'])}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    if result["best"] is None:
        print("no run has a validation evaluation")
        return 1
    print(f"best: {result['best']} at step {result['best_step']} {result['best_values']}")
    for variant, best in {**result["best_per_variant"], **result["best_per_arm"]}.items():
        print(f"best of {variant}: {best['name']} at step {best['step']} ({100 * best['pass1']:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
