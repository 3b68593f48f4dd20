"""Issue 60's GRPO runs as committed (results/coder/grpo/RUN, or under a session's folder) and their figures: the
student-teacher gap at step 1, reward and valid outputs at the first and last steps, the step's parts and throughput.
Their evaluation folders (RUN/validation, RUN/eval) are ordinary evaluation folders (records.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

RUN_FILES = ("run_summary.json", "collapse_guard.jsonl", "arc_trl_config.json")
STEP_KEYS = ("reward", "reward_std", "frac_reward_zero_std", "rewards/valid_outputs/mean", "rewards/pixel_score/mean",
             "rewards/exact_match_fraction/mean", "episode/turns", "episode/truncated_rate", "episode/code_found_rate",
             "teacher_kl", "teacher_logp", "student_logp", "teacher_clipped_frac", "entropy", "time/step",
             "time/generate", "time/sandbox", "time/teacher", "time/weight_sync", "time/train", "time/other",
             "tokens/generated", "tokens/trained", "mfu", "learning_rate", "collapse_guard/level")


def slim_runs(work: Path, out: Path) -> list[Path]:
    """The GRPO runs' records (WORK/grpo/RUN: issue 60) under out/grpo/RUN: run_summary.json, collapse_guard.jsonl,
    arc_trl_config.json as they are, and steps.jsonl (each logged step's STEP_KEYS, from trainer_state.json's log
    history); a stand-in run_summary (`placeholder`: a stage skipped by hand) is left out."""
    written = []
    for state in sorted(work.glob("grpo/*/trainer_state.json")):
        run = state.parent
        summary = json.loads((run / "run_summary.json").read_text()) if (run / "run_summary.json").exists() else {}
        if "placeholder" in summary:
            continue
        target = out / "grpo" / run.name
        target.mkdir(parents=True, exist_ok=True)
        for name in RUN_FILES:
            if (run / name).exists():
                shutil.copy2(run / name, target / name)
        steps = [{"step": h["step"], **{k: h[k] for k in STEP_KEYS if k in h}}
                 for h in json.loads(state.read_text())["log_history"] if "reward" in h]
        (target / "steps.jsonl").write_text("".join(json.dumps(row) + "\n" for row in steps))
        written.append(target)
    return written


def run_figures(run: Path) -> dict[str, Any]:
    """One GRPO run's figures from its committed steps.jsonl and arc_trl_config.json: the student-teacher gap at step 1
    (teacher_kl on the warm student's own episodes: issue 60's first measurement), the reward and valid outputs at the
    first and last steps, the step's parts and throughput, the time budget it ran under."""
    from statistics import fmean

    steps = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines() if line.strip()]
    config = json.loads((run / "arc_trl_config.json").read_text()) if (run / "arc_trl_config.json").exists() else {}
    arc = config.get("arc", {})

    def mean(key: str, rows: list[dict[str, Any]]) -> float | None:
        values = [r[key] for r in rows if r.get(key) is not None]
        return round(fmean(values), 6) if values else None

    def ratio(numerator: str, denominator: str) -> float | None:
        rows = [r for r in steps if r.get(numerator) is not None and r.get(denominator)]
        return round(sum(r[numerator] for r in rows) / sum(r[denominator] for r in rows), 1) if rows else None

    first, last = steps[:1], steps[-1:]
    return {
        "steps": len(steps), "teacher_tau": arc.get("teacher_tau"), "adv_tau": arc.get("adv_tau"),
        "max_train_seconds": arc.get("max_train_seconds"),
        "teacher_kl_step1": mean("teacher_kl", first), "teacher_kl_last": mean("teacher_kl", last),
        "reward_first": mean("reward", first), "reward_last": mean("reward", last),
        "valid_outputs_first": mean("rewards/valid_outputs/mean", first),
        "valid_outputs_last": mean("rewards/valid_outputs/mean", last),
        "zero_std_frac_mean": mean("frac_reward_zero_std", steps),
        "step_s": {part: mean(f"time/{part}", steps)
                   for part in ("step", "generate", "sandbox", "teacher", "weight_sync", "train", "other")},
        "generated_tokens_per_s": ratio("tokens/generated", "time/generate"),
        "trained_tokens_per_s": ratio("tokens/trained", "time/train"), "mfu": mean("mfu", steps),
        "collapse_levels": sorted({r["collapse_guard/level"] for r in steps if "collapse_guard/level" in r}),
    }
