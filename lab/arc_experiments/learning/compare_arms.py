"""Compare the RL arms of several learning experiments' results, each run against the student it started from.

    python -m arc_experiments.learning.compare_arms --arm grpo-opd results/gpu_learning/results-machine*.json \
        --control grpo-only results/gpu_learning/results-machine*.json \
        results/gpu_learning/teacher-1epoch/results-machine*.json

A run is an RL run of a results.json (one machine's, or several merged) with a final held-out evaluation; its start
is the evaluation of the student build it recorded (`report.start_of`). A run found in several files (overlapping
globs, a merged file beside the machines' files) counts once. The arm's runs come from the first list of files, the
control's from the second, so a control that does not depend on what changed between experiments (GRPO only does not
use the teacher) can pool every seed measured with its config. Prints each run's gain over its start, then the
seed-aware intervals (seed_interval.py: a t interval with a task part, paired over tasks, and a seed part, the
variance of the runs' gains; an arm with one run borrows the other's) of arm - student, control - student and
arm - control, with the interval of the tasks alone beside each.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from arc_experiments.learning.report import start_of
from arc_experiments.learning.seed_interval import pooled_seed_variance, seed_interval

Run = tuple[str, dict[str, float], dict[str, float]]  # label, the run's per-task pass@1, its student's


def run_identity(name: str, run: dict[str, Any], final: dict[str, Any]) -> str:
    """The same run seen in two files: its name, the build it started from and its final evaluation's numbers (for
    results without fingerprints, the per-task pass@1 of 256 tasks tells runs apart)."""
    return json.dumps([name, run.get("student_model"), final.get("model"), final["per_task"]], sort_keys=True)


def runs_of(paths: list[str], arm: str) -> list[Run]:
    """The evaluated runs of `arm` in the results files, each once, with the per-task pass@1 of its own student."""
    out, seen = [], {}
    for path in dict.fromkeys(str(Path(p).resolve()) for p in paths):
        results = json.loads(Path(path).read_text())
        heldout = results.get("heldout", {})
        if "student" not in heldout:
            raise SystemExit(f"{path}: no student evaluation to compare its runs with")
        for name, run in sorted(results.get("runs", {}).items()):
            if run.get("arm") != arm or run.get("final") not in heldout:
                continue
            key = run_identity(name, run, heldout[run["final"]])
            if key in seen:
                print(f"{name} of {path}: the same run as in {seen[key]}, counted once")
                continue
            seen[key] = path
            try:
                start = start_of(results, name)
            except ValueError as error:
                raise SystemExit(f"{path}: {error}") from None
            out.append((f"{name} of {path}", heldout[run["final"]]["per_task"], heldout[start]["per_task"]))
    if not out:
        raise SystemExit(f"no evaluated {arm} run in {', '.join(paths)}")
    return out


def gain(run: Run) -> float:
    _, after, before = run
    return sum(after[t] - before[t] for t in after) / len(after)


def compare(arm: list[Run], control: list[Run]) -> dict[str, dict[str, Any]]:
    """The seed-aware intervals of arm - student, control - student and arm - control (each run's gain over its own
    student); an arm with one run takes the run-to-run variance of the other (pooled)."""
    def gains(runs: list[Run]) -> list[dict[str, float]]:
        return [{t: after[t] - before[t] for t in after} for _, after, before in runs]

    a, c = gains(arm), gains(control)
    pooled = pooled_seed_variance([a, c])
    return {"arm - student": seed_interval([a], pooled=pooled, names=["arm"]),
            "control - student": seed_interval([c], pooled=pooled, names=["control"]),
            "arm - control": seed_interval([a, c], pooled=pooled, names=["arm", "control"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arm", nargs="+", required=True, metavar=("ARM", "RESULTS_JSON"))
    parser.add_argument("--control", nargs="+", required=True, metavar=("ARM", "RESULTS_JSON"))
    args = parser.parse_args(argv)
    if len(args.arm) < 2 or len(args.control) < 2:
        parser.error("--arm and --control: an arm name, then one or more results.json files")
    arm, control = runs_of(args.arm[1:], args.arm[0]), runs_of(args.control[1:], args.control[0])
    for label, runs in ((args.arm[0], arm), (args.control[0], control)):
        for run in runs:
            print(f"{label:>10}  {run[0]}: gain over its student {100 * gain(run):+.2f} points")
    for name, res in compare(arm, control).items():
        (lo, hi), (t_lo, t_hi) = res["ci"], res["task_only_ci"]
        seeds = ", ".join(f"{k} {v}" for k, v in res["seed_part"].items())
        print(f"{name:>18}: {100 * res['mean']:+.2f} points, 95% CI [{100 * lo:+.2f}, {100 * hi:+.2f}] "
              f"(tasks alone [{100 * t_lo:+.2f}, {100 * t_hi:+.2f}]; {res['n_tasks']} tasks; seed part: {seeds})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
