"""Where the committed results' machine logs lie: what a GPU machine printed for results/P (the queue's log, each
command's log, nvidia-smi samples, log tarballs) is committed under lab/logs/P, beside the experiments and out of
the product's results/ (results/P/logs/NAME was once its place: lab/logs/P/NAME now; results/P/logs_X/ is
lab/logs/P/logs_X/)."""

from __future__ import annotations

from pathlib import Path


def logs_of(folder: Path) -> Path:
    """lab/logs/P for a checkout's results/P (the last folder named `results` in the path)."""
    parts = folder.parts
    at = len(parts) - 1 - parts[::-1].index("results")
    return Path(*parts[:at], "lab", "logs", *parts[at + 1:])


def checkout_path(path: Path) -> str:
    """`path` as the figures name a file: relative to its checkout (the parent of the nearest `results` or `lab`)."""
    return path.relative_to(next(p for p in path.parents if p.name in ("results", "lab")).parent).as_posix()
