"""Compare evaluation folders (e.g. baseline vs RL) side by side in one markdown table, best values in bold.

Each folder is the output of `arc-trl evaluate score`. Columns are those of `tables.py` plus one `pass@k` column per k
found in any folder (from `pass_at_k.json`, or computed from `per_attempt.jsonl`; "-" where a folder lacks that k).
Folders scored on different datasets are not comparable: the command warns and bolds nothing. `--by-task` adds, for
each folder after the first, the tasks it solves that the first does not (gained) and those it no longer solves
(lost), from `per_attempt.jsonl` (a task is solved when one of its attempts passed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arc_trl.eval.passk import count_passes, load_pass_at_k, read_per_attempt
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


def datasets_differ(dirs: Sequence[str | Path]) -> dict[str, str | None] | None:
    """{folder: dataset} when the folders were scored on different datasets, else None."""
    found = {str(d): dataset_name(d, read_metrics(d)) for d in dirs}
    return found if len(set(found.values())) > 1 else None


def solved_tasks(eval_dir: str | Path) -> set[str]:
    """The tasks of a folder with at least one passed attempt (augmented attempts count for their original)."""
    return {task_id for task_id, (_, passed) in count_passes(read_per_attempt(eval_dir)).items() if passed}


def by_task_lines(dirs: Sequence[str | Path], names: Sequence[str]) -> list[str]:
    """For each folder after the first: the tasks it gained and lost against the first."""
    base = solved_tasks(dirs[0])
    lines = [f"solved tasks: {names[0]} {len(base)}"]
    for eval_dir, name in zip(dirs[1:], names[1:]):
        solved = solved_tasks(eval_dir)
        gained, lost = sorted(solved - base), sorted(base - solved)
        lines.append(f"{name} vs {names[0]}: {len(solved)} solved, {len(gained)} gained, {len(lost)} lost, "
                     f"{len(solved & base)} kept")
        lines.append(f"  gained: {' '.join(gained) or '-'}")
        lines.append(f"  lost:   {' '.join(lost) or '-'}")
    return lines


def compare_dirs(
    dirs: Sequence[str | Path],
    names: Sequence[str] | None = None,
    dataset: str | None = None,
    plot_path: str | Path | None = None,
) -> str:
    """Markdown table comparing `dirs` (one row each, named by `names` or the folder names), best value in bold
    (none when the folders come from different datasets: no best among rows that measure different things).

    With `plot_path`, also draws the pass@k curves of all folders in one PNG.
    """
    rows, columns, curves = compare_rows(dirs, names, dataset)
    percent = [c for c in columns if c not in LABEL_COLUMNS]
    comparable = dataset is not None or datasets_differ(dirs) is None
    table = format_table(rows, columns, percent_columns=percent, bold_best=comparable)
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
    parser.add_argument("--by-task", action="store_true",
                        help="also list, per folder after the first, the tasks it gained and lost against the first")
    return parser


def run_compare(args: argparse.Namespace) -> int:
    """`arc-trl evaluate compare`: exit 0 done, 2 when a folder cannot be read."""
    try:
        table = compare_dirs(args.dirs, args.names, args.dataset, args.plot)
        differ = None if args.dataset else datasets_differ(args.dirs)
        by_task = by_task_lines(args.dirs, _labels(args.dirs, args.names)) if args.by_task else []
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if differ:
        listed = ", ".join(f"{Path(d).name}: {name or 'unknown'}" for d, name in differ.items())
        print(f"warning: the folders were scored on different datasets ({listed}); their rows measure different "
              "things, so no value is marked best", file=sys.stderr)
    print(table, end="")
    if by_task:
        print("\n" + "\n".join(by_task))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(table)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare evaluation folders side by side (markdown table).")
    return run_compare(add_compare_arguments(parser).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
