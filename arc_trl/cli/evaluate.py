"""Evaluation command line.

    arc-trl evaluate score --dataset NAME_OR_PATH --completions FILE.jsonl --output-dir DIR [--workers N]

Each subcommand lives in a module of `arc_trl.eval` that provides `add_<name>_arguments(parser)` and
`run_<name>(args) -> exit code`; register it in `SUBCOMMANDS` below (imported only when that subcommand runs).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence


# name -> (module, help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "score": ("arc_trl.eval.score", "replay completions in the sandbox and write metrics.json + per_attempt.jsonl"),
    "generate": ("arc_trl.eval.generate", "sample attempts with the training agent (vLLM/transformers), then score"),
    "compare": ("arc_trl.eval.compare", "compare evaluation folders side by side (markdown table, pass@k)"),
    "submit": ("arc_trl.eval.submission", "vote per-attempt predictions into a Kaggle submission"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Evaluate ARC completions.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_module, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    if command is None:
        parser.parse_args(argv)  # prints usage / the error, and exits 2 (or 0 for --help)
        return 2
    module = importlib.import_module(SUBCOMMANDS[command][0])
    sub = argparse.ArgumentParser(prog=f"{parser.prog} {command}", description=SUBCOMMANDS[command][1])
    getattr(module, f"add_{command}_arguments")(sub)
    return int(getattr(module, f"run_{command}")(sub.parse_args(argv[1:])))


if __name__ == "__main__":
    raise SystemExit(main())
