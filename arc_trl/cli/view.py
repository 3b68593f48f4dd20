"""`arc-trl view PATH`: an evaluation folder or a training run's rollout dumps as one self-contained HTML report.

    arc-trl view evals/run-step200                      # -> evals/run-step200/report.html
    arc-trl view outputs/demo/quick                     # its rollouts/ -> outputs/demo/quick/rollouts/report.html
    arc-trl view outputs/run/eval_arc/step_000100.jsonl --dataset arc-agi-1/eval --output step100.html

The report opens from disk in any browser (no server, no network): `arc_trl.view.report` says what it shows.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REPORT_FILE = "report.html"


def default_output(path: Path, kind: str) -> Path:
    """Beside what was read: DIR/report.html for a folder, rollouts/report.html for a run, FILE.html for a file."""
    if kind == "rollouts":
        folder = path.parent if path.is_file() else (path / "rollouts" if (path / "rollouts").is_dir() else path)
        return folder / REPORT_FILE
    return path / REPORT_FILE if path.is_dir() else path.with_suffix(".html")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arc-trl view", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("path", help="an evaluation folder (completions.jsonl), a completions file, a run folder, its "
                                     "rollouts/ folder or one rollouts/step_NNNNNN.jsonl")
    parser.add_argument("--dataset", default=None,
                        help="the tasks' dataset, to draw their train pairs (default: the evaluation folder's; dumps "
                             "carry their tasks)")
    parser.add_argument("--output", default=None, help="the HTML file to write (default: beside PATH, report.html)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from arc_trl.view import ViewInputError, load_source, write_report

    try:
        source = load_source(args.path, args.dataset)
    except (ViewInputError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    output = Path(args.output) if args.output else default_output(Path(args.path), source.kind)
    write_report(source, output)
    attempts = sum(len(t.attempts) for t in source.tasks)
    for note in source.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {output} ({len(source.tasks)} tasks, {attempts} attempts): open it in a browser")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
