"""Per-task pass@1 of an evaluation folder (`evaluate.py generate` / `score`): the input of the intervals.

A task's pass@1 is the fraction of its scored attempts that passed (every test output correct), read from the
folder's `per_attempt.jsonl` (one line per attempt, `passed` true/false; null when the solutions are unknown: left
out). Attempts on augmented copies count for the original task (`arc_trl.eval.passk.count_passes`). The mean over
tasks equals `metrics.json`'s `pass_rate` when every task has the same number of attempts.
"""

from __future__ import annotations

from pathlib import Path

from arc_trl.eval.passk import count_passes, read_per_attempt


def per_task_pass1(eval_dir: str | Path, expected_attempts: int | None = None) -> dict[str, float]:
    """{task_id: pass@1} of an evaluation folder, sorted by task id.

    `expected_attempts`: every task must have exactly this many scored attempts (ValueError naming the tasks that do
    not), so that an interrupted or mixed folder is not read as a finished one."""
    counts = count_passes(read_per_attempt(eval_dir))
    if not counts:
        raise ValueError(f"{eval_dir}: no scored attempt (no test outputs known?)")
    if expected_attempts is not None:
        wrong = sorted(t for t, (n, _) in counts.items() if n != expected_attempts)
        if wrong:
            shown = ", ".join(f"{t} ({counts[t][0]})" for t in wrong[:5])
            raise ValueError(f"{eval_dir}: {len(wrong)} task(s) without {expected_attempts} scored attempts: {shown}")
    return {task: c / n for task, (n, c) in sorted(counts.items())}
