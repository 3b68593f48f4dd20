"""Markdown tables of evaluation metrics, in the layout of the research log.

One row per evaluation folder (the output of `arc-trl evaluate score`): its `metrics.json` fractions are shown as
percentages with 2 decimals, a missing value as "-". `n_preds` is the number of attempts per task
(`n_attempts / n_tasks`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.json"
METRICS_TABLE_FILE = "metrics.md"
SAMPLING_FILE = "sampling.json"

# (table header, metrics.json key). All are fractions in [0, 1], higher is better.
METRIC_COLUMNS: list[tuple[str, str]] = [
    ("valid code", "valid_code"),
    ("valid outputs", "valid_outputs"),
    ("unique outputs", "unique_outputs"),
    ("train_pixel_score", "train_pixel_score"),
    ("train_correct_grids", "train_correct_grids"),
    ("train_pass_rate", "train_pass_rate"),
    ("test_pixel_score", "pixel_score"),
    ("test_correct_grids", "correct_grids"),
    ("test_pass_rate", "pass_rate"),
    ("is_correct", "is_correct"),
]
LABEL_COLUMNS = ["dataset", "experiment", "n_preds"]
PERCENT_COLUMNS = [header for header, _ in METRIC_COLUMNS]
MISSING = "-"
MAX_LABEL = 40  # characters of a dataset label in a table


def read_metrics(eval_dir: str | Path) -> dict[str, Any]:
    """Load `eval_dir/metrics.json`, checking that every table metric present is a number."""
    path = Path(eval_dir) / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (run `arc-trl evaluate score` on this folder first)")
    try:
        metrics = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg})") from None
    if not isinstance(metrics, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(metrics).__name__}")
    for key in [key for _, key in METRIC_COLUMNS] + ["n_tasks", "n_attempts"]:
        value = metrics.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{path}: field {key!r} must be a number or null, got {value!r}")
    return metrics


def dataset_name(eval_dir: str | Path, metrics: Mapping[str, Any]) -> str | None:
    """The dataset an evaluation folder scored: `metrics.json` "dataset", else `sampling.json` "dataset"."""
    if isinstance(metrics.get("dataset"), str):
        return metrics["dataset"]
    sampling = Path(eval_dir) / SAMPLING_FILE
    if sampling.is_file():
        try:
            value = json.loads(sampling.read_text()).get("dataset")
        except (json.JSONDecodeError, AttributeError):
            return None
        return value if isinstance(value, str) else None
    return None


def short_label(label: str | None, width: int = MAX_LABEL) -> str | None:
    """A label cut to `width` characters (a `synthetic:` spec runs to 80 and more), its end marked with '…'."""
    return label if label is None or len(label) <= width else label[: width - 1] + "…"


def metrics_row(metrics: Mapping[str, Any], dataset: str | None, experiment: str | None) -> dict[str, Any]:
    """One table row {header: value} from a metrics dict; values stay raw (fractions) until `format_table`."""
    n_tasks, n_attempts = metrics.get("n_tasks"), metrics.get("n_attempts")
    n_preds = n_attempts / n_tasks if n_tasks and n_attempts is not None else None
    row: dict[str, Any] = {"dataset": short_label(dataset), "experiment": experiment, "n_preds": n_preds}
    for header, key in METRIC_COLUMNS:
        row[header] = metrics.get(key)
    return row


def format_cell(value: Any, percent: bool) -> str:
    if value is None:
        return MISSING
    if percent:
        return f"{100 * value:.2f}%"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.1f}"
    return str(value)


def best_rows(values: Sequence[Any]) -> set[int]:
    """Indices of the rows holding the highest value (compared as shown, to 2 decimals of a percent).

    Empty when fewer than two rows have a value or when all values are equal: there is no winner to mark.
    """
    shown = {i: round(100 * v, 2) for i, v in enumerate(values) if v is not None}
    if len(shown) < 2 or len(set(shown.values())) == 1:
        return set()
    top = max(shown.values())
    return {i for i, v in shown.items() if v == top}


def format_table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    percent_columns: Sequence[str] = PERCENT_COLUMNS,
    bold_best: bool = False,
) -> str:
    """Render rows as an aligned markdown table. With `bold_best`, the best value of each percent column is **bold**."""
    columns = list(columns or (rows[0].keys() if rows else LABEL_COLUMNS + PERCENT_COLUMNS))
    percent = set(percent_columns)
    cells = [[format_cell(row.get(col), col in percent) for col in columns] for row in rows]
    if bold_best:
        for j, col in enumerate(columns):
            if col in percent:
                for i in best_rows([row.get(col) for row in rows]):
                    cells[i][j] = f"**{cells[i][j]}**"
    widths = [max([len(col)] + [len(line[j]) for line in cells]) for j, col in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    separator = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(columns), separator] + [line(c) for c in cells]) + "\n"


def metrics_table(eval_dir: str | Path, dataset: str | None = None, experiment: str | None = None) -> str:
    """The one-row markdown table of an evaluation folder."""
    metrics = read_metrics(eval_dir)
    dataset = dataset or dataset_name(eval_dir, metrics)
    row = metrics_row(metrics, dataset, experiment or Path(eval_dir).resolve().name)
    return format_table([row], LABEL_COLUMNS + PERCENT_COLUMNS)


def write_metrics_table(
    eval_dir: str | Path, dataset: str | None = None, experiment: str | None = None, echo: bool = True
) -> str:
    """Build the table of `eval_dir`, save it as `eval_dir/metrics.md` and (if `echo`) print it."""
    table = metrics_table(eval_dir, dataset, experiment)
    (Path(eval_dir) / METRICS_TABLE_FILE).write_text(table)
    if echo:
        print(table, end="")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print and save (DIR/metrics.md) the metrics table of a folder.")
    parser.add_argument("eval_dir", help="folder written by `arc-trl evaluate score` (holds metrics.json)")
    parser.add_argument("--dataset", default=None, help="dataset label (default: from metrics.json/sampling.json)")
    parser.add_argument("--experiment", default=None, help="experiment label (default: the folder name)")
    args = parser.parse_args(argv)
    write_metrics_table(args.eval_dir, args.dataset, args.experiment)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
