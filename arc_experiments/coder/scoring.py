"""Scoring the experiment's folders in processes of their own while the engine generates the next one: a replay of
3,200 attempts takes minutes of CPU in which the GPU would wait (`python -m arc_experiments.coder score-folder --
GENERATE_ARGS` is what each runs; here too, for a folder that came back unscored)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from arc_experiments.coder.plan import ROOT

SCORE_WORKERS = 8  # a background scorer's sandbox processes (the engine's episodes keep theirs)
ENV = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"}


class Work(Protocol):
    """What scoring needs of the experiment's work folder (`arc_experiments.coder.run.Work`)."""

    root: Path
    scorers: list[tuple[str, subprocess.Popen]]  # (folder, its background scorer)

    def log(self, name: str) -> Path: ...

    def note(self, **event) -> None: ...


def say(text: str) -> None:
    """A timestamped progress line (what `coder.sh status` shows)."""
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def score_in_background(work: Work, folder: Path, argv: list[str]) -> None:
    """Score a generated folder in a process of its own (`score-folder`): the engine goes on meanwhile."""
    name = f"score-{'-'.join(folder.relative_to(work.root).parts)}"
    log = open(work.log(name), "w")  # noqa: SIM115  (closed with the process: the child holds its own descriptor)
    process = subprocess.Popen([sys.executable, "-m", "arc_experiments.coder", "score-folder", "--", *argv,
                                "--workers", str(SCORE_WORKERS)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                               env={**os.environ, **ENV}, start_new_session=True)
    log.close()
    work.scorers.append((str(folder.relative_to(work.root)), process))
    say(f"   scoring {folder} in the background (pid {process.pid})")


def scorers_running(work: Work) -> bool:
    """Whether a background scorer still runs (those that ended are noted in the timeline once)."""
    for folder, process in list(work.scorers):
        if process.poll() is not None:
            work.note(event="scored", folder=folder, rc=process.returncode)
            say(f"   scored {folder}: rc={process.returncode}")
            work.scorers.remove((folder, process))
    return bool(work.scorers)


def score_folder_command(argv: list[str]) -> int:
    """`score-folder -- GENERATE_ARGV`: score a folder that `evaluate generate ... --no-score` generated whole, as
    `evaluate generate` would have (exit 3 when attempts are missing: no engine is started here)."""
    from arc_trl.eval.generate import GenerateInputError, add_generate_arguments, prepare, score_plan

    args = add_generate_arguments(argparse.ArgumentParser()).parse_args([a for a in argv if a != "--no-score"])
    try:
        plan = prepare(args)
    except GenerateInputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if plan.jobs:
        print(f"error: {len(plan.jobs)} attempt(s) of {args.output_dir} are not generated: not scored", file=sys.stderr)
        return 3
    score_plan(plan)
    return 0
