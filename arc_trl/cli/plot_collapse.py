"""Plot a run's collapse-guard signals: arc-trl plot-collapse OUTPUT_DIR --out docs/img/x.png [--keys ...]"""

from __future__ import annotations

import argparse
from pathlib import Path


from arc_trl.collapse.plots import DEFAULT_KEYS, plot_guard_log  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output_dir", help="a run's output_dir (holding collapse_guard.jsonl) or the .jsonl itself")
    parser.add_argument("--out", required=True)
    parser.add_argument("--keys", nargs="+", default=list(DEFAULT_KEYS))
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    path = Path(args.output_dir)
    if path.is_dir():
        path = path / "collapse_guard.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path} does not exist (was the run trained with collapse_guard on?)")
    print(plot_guard_log(path, args.out, tuple(args.keys), args.title))


if __name__ == "__main__":
    main()
