"""Each headline summary: its file, the committed inputs it is computed from, how it is built and written; the command
that rewrites them or checks the committed ones."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]  # the checkout


@dataclass(frozen=True)
class Summary:
    path: str  # the summary file, relative to the checkout
    inputs: str  # what it is computed from, in words (results/README.md)
    build: Callable[[Path], dict[str, Any]]
    indent: int = 2  # as the experiment's own writer indents it


def learning_06b(root: Path) -> dict[str, Any]:
    """The random-init 0.6B experiment: its machines' results merged, then the report's summary."""
    from arc_experiments.learning.merge import merge_results
    from arc_experiments.learning.report import summary

    paths = sorted((root / "results" / "gpu_learning").glob("results-machine*.json"))
    if not paths:
        raise FileNotFoundError(f"{root}/results/gpu_learning: no results-machine*.json")
    return summary(merge_results([json.loads(p.read_text()) for p in paths]))


def _smollm2(root: Path) -> dict[str, Any]:
    from arc_experiments.figures.smollm2 import summary

    return summary(root)


def _steps(root: Path) -> dict[str, Any]:
    from arc_experiments.figures import fp8
    from arc_experiments.figures.steps import summary

    return summary(root) | fp8.summary(root)


def _multigpu(root: Path) -> dict[str, Any]:
    from arc_experiments.figures.multigpu import summary

    return summary(root)


def _coder(root: Path) -> dict[str, Any]:
    from arc_experiments.coder.records import summary

    return summary(root)


SUMMARIES = {
    "learning": Summary("results/gpu_learning_summary.json", "results/gpu_learning/results-machine*.json",
                        learning_06b),
    "smollm2": Summary("results/gpu_learning_smollm2_summary.json",
                       "results/gpu_learning_smollm2/ (and machine 1's queue log, lab/logs/)", _smollm2),
    "step": Summary("results/gpu_step_summary.json",
                    "results/gpu_profiles/speed_*.json, results/gpu_step_speed/summary_inputs.json, results/gpu_fp8/, "
                    "results/gpu_multigpu/MACHINE/layout_*-fp8.json, their machine logs (lab/logs/)",
                    _steps, indent=1),
    "multigpu": Summary("results/gpu_multigpu_summary.json", "results/gpu_multigpu/ (+ lab/logs/gpu_multigpu/)",
                        _multigpu, indent=1),
    "coder": Summary("results/coder_summary.json", "results/coder/ (each folder's per_attempt.jsonl.gz)", _coder,
                     indent=1),
}


def render(name: str, root: Path = ROOT) -> str:
    """The text of summary `name` as computed from its committed inputs."""
    summary = SUMMARIES[name]
    return json.dumps(summary.build(root), indent=summary.indent) + "\n"


def differences(written: dict[str, Any], computed: dict[str, Any]) -> list[str]:
    """The top-level keys whose values differ (or that one side lacks)."""
    return [key for key in dict.fromkeys([*written, *computed]) if written.get(key, ...) != computed.get(key, ...)]


def main(argv: list[str] | None = None) -> int:
    import arc_experiments.figures as package

    parser = argparse.ArgumentParser(prog="python -m arc_experiments.figures", description=package.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"the summaries to write (default: all): {', '.join(SUMMARIES)}")
    parser.add_argument("--check", action="store_true", help="compare with the committed files; write nothing; "
                        "exit 1 naming the keys of a summary that differs")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in SUMMARIES]
    if unknown:
        parser.error(f"no summary {unknown}; summaries: {', '.join(SUMMARIES)}")
    stale = []
    for name in args.names or SUMMARIES:
        summary, text = SUMMARIES[name], render(name, args.root)
        path = args.root / summary.path
        if not args.check:
            path.write_text(text)
            print(f"wrote {summary.path} from {summary.inputs}")
        elif not path.exists() or path.read_text() != text:
            keys = differences(json.loads(path.read_text()), json.loads(text)) if path.exists() else ["(no file)"]
            stale.append(name)
            print(f"{summary.path}: differs from what {summary.inputs} give: {', '.join(keys) or 'formatting'}")
        else:
            print(f"{summary.path}: as computed from {summary.inputs}")
    return 1 if stale else 0
