"""The experiment's work folder on a GPU machine (`Work`: its paths, logs, timeline, smoke sizes) and the lock that
lets two queues (lanes) share it: a warm start one lane is making is waited for by the other."""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from arc_experiments.coder.scoring import Scorer


@dataclass
class Work:
    root: Path
    wheels: Path
    smoke: bool = False  # a CPU rehearsal: 2 tasks a folder, 1 attempt, short turns, one SFT step (`--smoke`)
    scorers: list[Scorer] = field(default_factory=list)  # the folders' background scorers still running
    failed_scores: list[str] = field(default_factory=list)  # folders whose scorer failed (the run's exit code says)

    def scaled(self, argv: list[str], n: int) -> tuple[list[str], int]:
        """A folder's generate arguments and attempts, cut down for a smoke run."""
        if not self.smoke:
            return argv, n
        argv = [*argv]
        for flag, value in (("--n-predictions", "1"), ("--max-tokens-per-turn", "48"), ("--batch-size", "4"),
                            ("--workers", "2"), ("--max-model-len", "4096"), ("--kv-cache-memory-gib", "1")):
            if flag in argv:
                argv[argv.index(flag) + 1] = value
        return [*argv, "--max-tasks", "2", "--max-prompt-tokens", "1500", "--enforce-eager"], 1

    def sft_extra(self) -> list[str]:
        return ["--max_steps", "1", "--use_cpu", "true", "--bf16", "false", "--gradient_checkpointing", "false",
                "--dataset", "synthetic:n=2,seed=1,difficulty=tiny", "--max_length", "1024",
                "--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "1"] if self.smoke else []

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def log(self, name: str) -> Path:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        return self.root / "logs" / f"{name}.log"

    def note(self, **event) -> None:
        with open(self.path("timeline.jsonl"), "a") as f:
            f.write(json.dumps({"time": round(time.time(), 1), **event}) + "\n")


@contextlib.contextmanager
def making(folder: Path) -> Iterator[None]:
    """Held while a warm start is made (transcripts, SFT, merge): a second queue on the machine (`coder.sh`'s LANE)
    waits for it (`being_made`) and then finds it made, rather than training the same model beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "making.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when the process dies
        yield


def being_made(folder: Path) -> bool:
    """Whether another process holds `making(folder)` now."""
    if not (folder / "making.lock").exists():
        return False
    with open(folder / "making.lock") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared: two probes never see each other
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False
