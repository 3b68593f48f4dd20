"""`collect`: what a machine's GPU stages measured, packed into a few files under OUT."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from arc_experiments.gpu.runner import Context


def _kept(experiment: str) -> tuple[str, ...]:
    """What comes back, as patterns under WORK (`experiment`: the learning experiment's folder there)."""
    return (
        "logs/*.log",
        "logs/gpu_memory.csv",
        *(
            f"{experiment}/{pattern}"
            for pattern in (
                "logs/*.log",
                "results.json",
                "*/trainer_state.json",
                "*/run_summary.json",
                "eval/*/metrics.json",
                "eval/*/completions.jsonl",
                "eval/*/per_attempt.jsonl",
                "sweep/*.json",
                "sweep/*/trainer_state.json",
                "sweep/*/run_summary.json",
                "sweep/*/eval_arc/*.jsonl",
                "arms/*.json",
                "arms/*/config.yaml",
                "arms/*/trainer_state.json",
                "arms/*/run_summary.json",
                "arms/*/eval_arc/*.jsonl",
                "arc-agi-1/*/metrics.json",
                "arc-agi-1/*/completions.jsonl",
                "arc-agi-1/*/run_summary.json",
            )
        ),
        "runs/*/server_logs/*.log",
        "logs/gpu_peaks_*.csv",
        "drills/*.log",
        "runs/*/trainer_state.json",
        "runs/*/run_summary.json",
        "runs/*/*.jsonl",
    )


def collect(ctx: Context) -> list[Path]:
    """The experiment's results.json, and one tarball (OUT/logs.tar.gz, rewritten after each stage, so a machine
    taken back mid-queue leaves the stages before) of logs, GPU memory samples, trainer states, run summaries,
    evaluation metrics, completions and per-attempt files. With the stages' own outputs (profiles, benchmark JSONs)
    that is a few files under OUT: some ways of reaching a machine bring back only a few."""
    if ctx.dry_run:
        return []
    ctx.out.mkdir(parents=True, exist_ok=True)
    written = []
    if (ctx.learning / "results.json").exists():
        written.append(Path(shutil.copy(ctx.learning / "results.json", ctx.out / "results.json")))
    archive = ctx.out / "logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for pattern in _kept(ctx.learning.name):
            for path in sorted(ctx.work.glob(pattern)):
                tar.add(path, arcname=str(path.relative_to(ctx.work)))
    return [*written, archive]
