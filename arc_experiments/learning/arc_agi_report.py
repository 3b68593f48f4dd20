"""Real-ARC figures of the learning experiment: each model's `evaluate.py generate` folder on an ARC dataset, as pass@k
over the WHOLE dataset (tasks left unattempted, e.g. prompts longer than the model's context, count as failures).

    python -m arc_experiments.learning.arc_agi_report /tmp/arc-gpu/smollm2/arc-agi-1 --out arc_agi_1.json

Each `eval-NAME/` folder holds metrics.json, pass_at_k.json and per_attempt.jsonl. The dataset's size is metrics.json's
`n_dataset_tasks` (which counts the dropped tasks since they are recorded), or `--dataset-tasks` for folders scored
before that, where only the attempted tasks were counted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def model_figures(folder: str | Path, dataset_tasks: int | None = None) -> dict[str, Any]:
    """pass@k over the dataset and over the attempted tasks, and the solved task ids, of one generate folder."""
    folder = Path(folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    pass_at_k = json.loads((folder / "pass_at_k.json").read_text())
    attempted = int(pass_at_k["n_tasks"])
    total = int(dataset_tasks or metrics.get("n_dataset_tasks") or attempted)
    if total < attempted:
        raise ValueError(f"{folder}: {attempted} tasks attempted but the dataset is given {total} tasks")
    solved = set()
    with open(folder / "per_attempt.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if row.get("passed"):
                solved.add(row["task_id"])
    figures: dict[str, Any] = {"dataset": metrics.get("dataset"), "dataset_tasks": total, "attempted_tasks": attempted}
    for k, rate in sorted(pass_at_k["pass_at_k"].items(), key=lambda kv: int(kv[0])):
        figures[f"pass{k}"] = rate * attempted / total  # the unattempted tasks score 0
        figures[f"pass{k}_tasks"] = round(rate * attempted, 3)  # expected solved tasks (pass@1: mean over attempts)
    figures["solved_task_ids"] = sorted(solved)
    figures["valid_submissions"] = metrics.get("valid_outputs")
    return figures


def report(root: str | Path, dataset_tasks: int | None = None) -> dict[str, dict[str, Any]]:
    """{model name: figures} of every `eval-NAME/` folder under `root` that has been scored."""
    folders = sorted(p for p in Path(root).glob("eval-*") if (p / "pass_at_k.json").is_file())
    if not folders:
        raise SystemExit(f"{root}: no scored eval-*/ folder (metrics.json, pass_at_k.json)")
    return {p.name.removeprefix("eval-"): model_figures(p, dataset_tasks) for p in folders}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="the folder of the eval-NAME/ generate folders")
    parser.add_argument("--dataset-tasks", type=int, default=None,
                        help="tasks in the dataset (default: metrics.json's n_dataset_tasks)")
    parser.add_argument("--out", default=None, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    figures = report(args.root, args.dataset_tasks)
    for name, f in figures.items():
        print(f"{name:12} pass@1 {100 * f['pass1']:.2f}%  pass@2 {100 * f.get('pass2', float('nan')):.2f}%  "
              f"over {f['dataset_tasks']} tasks ({f['attempted_tasks']} attempted); solved: {f['solved_task_ids']}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
