"""Compare evaluation folders (e.g. baseline vs RL) side by side in one markdown table, best values in bold.

Each folder is the output of `arc-trl evaluate score`. Columns are those of `tables.py` plus one `pass@k` column per k
found in any folder (from `pass_at_k.json`, or computed from `per_attempt.jsonl`; "-" where a folder lacks that k).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arc_trl.eval.passk import load_pass_at_k
from arc_trl.eval.tables import LABEL_COLUMNS, PERCENT_COLUMNS, dataset_name, format_table, metrics_row, read_metrics


def _labels(dirs: Sequence[str | Path], names: Sequence[str] | None) -> list[str]:
    if names is None:
        return [Path(d).resolve().name for d in dirs]
    if len(names) != len(dirs):
        raise ValueError(f"got {len(names)} names for {len(dirs)} folders; give one name per folder")
    return list(names)


def compare_rows(
    dirs: Sequence[str | Path], names: Sequence[str] | None = None, dataset: str | None = None
) -> tuple[list[dict[str, Any]], list[str], dict[str, dict[str, Any]]]:
    """(rows, columns, pass@k curves by name) for the given folders."""
    if not dirs:
        raise ValueError("compare needs at least one evaluation folder")
    rows, curves = [], {}
    for eval_dir, name in zip(dirs, _labels(dirs, names), strict=True):
        metrics = read_metrics(eval_dir)
        rows.append(metrics_row(metrics, dataset or dataset_name(eval_dir, metrics), name))
        curve = load_pass_at_k(eval_dir)
        if curve and curve.get("pass_at_k"):
            curves[name] = curve
            for k, value in curve["pass_at_k"].items():
                rows[-1][f"pass@{k}"] = value
    ks = sorted({int(k) for curve in curves.values() for k in curve["pass_at_k"]})
    pass_columns = [f"pass@{k}" for k in ks]
    return rows, LABEL_COLUMNS + PERCENT_COLUMNS + pass_columns, curves


def compare_dirs(
    dirs: Sequence[str | Path],
    names: Sequence[str] | None = None,
    dataset: str | None = None,
    plot_path: str | Path | None = None,
) -> str:
    """Markdown table comparing `dirs` (one row each, named by `names` or the folder names), best value in bold.

    With `plot_path`, also draws the pass@k curves of all folders in one PNG.
    """
    rows, columns, curves = compare_rows(dirs, names, dataset)
    percent = [c for c in columns if c not in LABEL_COLUMNS]
    table = format_table(rows, columns, percent_columns=percent, bold_best=True)
    if plot_path is not None:
        from arc_trl.eval.plots import plot_pass_at_k

        plot_pass_at_k(curves, plot_path)
    return table


def add_compare_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("dirs", nargs="+", help="evaluation folders written by `arc-trl evaluate score`")
    parser.add_argument("--names", nargs="+", default=None, help="one row label per folder (default: folder names)")
    parser.add_argument("--dataset", default=None, help="dataset label for every row (default: from the folders)")
    parser.add_argument("--output", default=None, help="also save the markdown table to this file")
    parser.add_argument("--plot", default=None, help="also save a combined pass@k plot (PNG) to this file")
    return parser


def run_compare(args: argparse.Namespace) -> int:
    """`arc-trl evaluate compare`: exit 0 done, 2 when a folder cannot be read."""
    try:
        table = compare_dirs(args.dirs, args.names, args.dataset, args.plot)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table, end="")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(table)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare evaluation folders side by side (markdown table).")
    return run_compare(add_compare_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
