"""Scoring the experiment's folders in processes of their own while the engine generates the next one: a replay of
3,200 attempts takes minutes of CPU in which the GPU would wait (`python -m arc_experiments.coder score-folder --
GENERATE_ARGS` is what each runs; here too, for a folder that came back unscored)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from arc_experiments.coder.plan import ROOT

SCORE_WORKERS = 8  # a background scorer's sandbox processes (the engine's episodes keep theirs)
SCORE_DEADLINE_S = 3600.0  # a replay of 3,200 attempts took minutes; one past an hour is stuck, not slow
ARGV_FILE = "score_argv.json"  # in the folder: the generate arguments its scorer ran with (to score it again)
ENV = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"}


@dataclass
class Scorer:
    """A folder's background scorer."""

    folder: str  # relative to the work folder
    process: subprocess.Popen
    started: float = field(default_factory=time.monotonic)


class Work(Protocol):
    """What scoring needs of the experiment's work folder (`arc_experiments.coder.run.Work`)."""

    root: Path
    scorers: list[Scorer]
    failed_scores: list[str]  # folders whose scorer failed or ran past its deadline

    def log(self, name: str) -> Path: ...

    def note(self, **event) -> None: ...


def say(text: str) -> None:
    """A timestamped progress line (what `coder.sh status` shows)."""
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def score_in_background(work: Work, folder: Path, argv: list[str]) -> None:
    """Score a generated folder in a process of its own (`score-folder`): the engine goes on meanwhile. The
    arguments are kept in the folder (`score_argv.json`), so a folder that comes back unscored can be scored again."""
    name = f"score-{'-'.join(folder.relative_to(work.root).parts)}"
    argv = [*argv, "--workers", str(SCORE_WORKERS)]
    (folder / ARGV_FILE).write_text(json.dumps(argv) + "\n")
    log = open(work.log(name), "w")  # noqa: SIM115  (closed with the process: the child holds its own descriptor)
    process = subprocess.Popen([sys.executable, "-m", "arc_experiments.coder", "score-folder", "--", *argv],
                               stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **ENV},
                               start_new_session=True)  # killpg reaches it; its sandbox zygote ends with its socket
    log.close()
    work.scorers.append(Scorer(str(folder.relative_to(work.root)), process))
    say(f"   scoring {folder} in the background (pid {process.pid})")


def scorers_running(work: Work, deadline_s: float = SCORE_DEADLINE_S) -> bool:
    """Whether a background scorer still runs. Those that ended are noted in the timeline once, a failed one in
    `work.failed_scores`; one past `deadline_s` is killed with its process group and counted as failed."""
    for scorer in list(work.scorers):
        rc = scorer.process.poll()
        if rc is None and time.monotonic() - scorer.started > deadline_s:
            stop_scorer(scorer)
            rc = 124
        if rc is None:
            continue
        work.note(event="scored", folder=scorer.folder, rc=rc)
        say(f"   scored {scorer.folder}: rc={rc}" + (" (past its deadline: killed)" if rc == 124 else ""))
        if rc != 0:
            work.failed_scores.append(scorer.folder)
        work.scorers.remove(scorer)
    return bool(work.scorers)


def stop_scorer(scorer: Scorer) -> None:
    """Kill a scorer and its sandbox processes."""
    try:
        os.killpg(scorer.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    scorer.process.wait()


def stop_scorers(work: Work) -> None:
    """Kill every scorer still running (the queue is ending): none outlives it."""
    for scorer in list(work.scorers):
        if scorer.process.poll() is None:
            stop_scorer(scorer)
            work.note(event="scored", folder=scorer.folder, rc="killed: the queue ended")
            work.failed_scores.append(scorer.folder)
        work.scorers.remove(scorer)


def generated_whole(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """Every attempt the generate arguments ask for is in the folder's completions.jsonl (no engine needed)."""
    from arc_trl.eval.generate import GenerateInputError, prepare

    if not (Path(parser.parse_args(argv).output_dir) / "completions.jsonl").exists():
        return False
    try:
        return not prepare(parser.parse_args(argv)).jobs
    except GenerateInputError:
        return False  # the engine's run says why


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
