"""Real-ARC figures of the learning experiment: each model's `evaluate.py generate` folder on an ARC dataset, as pass@k
over the WHOLE dataset (tasks left unattempted, e.g. prompts longer than the model's context, count as failures).

    python -m arc_experiments.learning.arc_agi_report /tmp/arc-gpu/smollm2/arc-agi-1 --out arc_agi_1.json

Each `eval-NAME/` folder holds metrics.json and per_attempt.jsonl. The dataset's size is metrics.json's
`n_dataset_tasks` (dropped tasks included, `n_dropped_tasks`), or `--dataset-tasks` for folders scored before dropped
tasks were recorded (their `n_dataset_tasks` counts the attempted tasks only; they are refused without it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from arc_trl.eval.passk import count_passes, pass_at_k, read_per_attempt


def model_figures(folder: str | Path, dataset_tasks: int | None = None) -> dict[str, Any]:
    """pass@k over the dataset (k up to the fewest attempts of a task), expected solved tasks, and the solved task
    ids (original ids of augmented attempts), from one generate folder's per_attempt.jsonl and metrics.json."""
    folder = Path(folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    counts = count_passes(read_per_attempt(folder))
    if not counts:
        raise ValueError(f"{folder}: no scored attempt in per_attempt.jsonl")
    if dataset_tasks is None:
        if "n_dropped_tasks" not in metrics:  # scored before dropped tasks were recorded: it counts attempted ones
            raise ValueError(f"{folder}: metrics.json does not record dropped tasks (scored before they were); "
                             "pass --dataset-tasks")
        dataset_tasks = int(metrics["n_dataset_tasks"])
    if dataset_tasks < len(counts):
        raise ValueError(f"{folder}: {len(counts)} tasks attempted but the dataset is given {dataset_tasks} tasks")
    figures: dict[str, Any] = {"dataset": metrics.get("dataset"), "dataset_tasks": dataset_tasks,
                               "attempted_tasks": len(counts)}
    for k in range(1, min(n for n, _ in counts.values()) + 1):
        solved = sum(pass_at_k(n, c, k) for n, c in counts.values())  # the unattempted tasks score 0
        figures[f"pass{k}"], figures[f"pass{k}_tasks"] = solved / dataset_tasks, round(solved, 3)
    figures["solved_task_ids"] = sorted(task for task, (_, c) in counts.items() if c)
    figures["valid_outputs_over_attempts"] = metrics.get("valid_outputs")
    return figures


def report(root: str | Path, dataset_tasks: int | None = None) -> dict[str, dict[str, Any]]:
    """{model name: figures} of every `eval-NAME/` folder under `root` that has been scored."""
    folders = sorted(p for p in Path(root).glob("eval-*") if (p / "per_attempt.jsonl").is_file())
    if not folders:
        raise SystemExit(f"{root}: no scored eval-*/ folder (metrics.json, per_attempt.jsonl)")
    return {p.name.removeprefix("eval-"): model_figures(p, dataset_tasks) for p in folders}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the folder of the eval-NAME/ generate folders")
    parser.add_argument("--dataset-tasks", type=int, default=None,
                        help="tasks in the dataset (default: metrics.json's n_dataset_tasks)")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    try:
        figures = report(args.root, args.dataset_tasks)
    except (ValueError, OSError) as e:
        print(f"error: {e}")
        return 2
    for name, f in figures.items():
        print(f"{name:12} pass@1 {100 * f['pass1']:.2f}%  pass@2 {100 * f.get('pass2', float('nan')):.2f}%  "
              f"over {f['dataset_tasks']} tasks ({f['attempted_tasks']} attempted); solved: {f['solved_task_ids']}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
