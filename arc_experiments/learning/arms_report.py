"""The learning result from an `arms` run (configs/gpu/smollm2/arms.yaml): every arm's runs, each scored in training
on the held-out tasks at several steps (step 0: the student, through the same path), with seed-aware intervals.

    python -m arc_experiments.learning.arms_report /tmp/arc-gpu/smollm2/arms --chosen-steps grpo-only=20 grpo-opd=40 \
        --out summary.json

Per run (an arm = a sweep variant, a seed = the run's `seed`) and step: per-task pass@1 from
`output_dir/eval_arc/step_N.jsonl` against the run's `eval_dataset`. Each run's gain is measured against its own step
0, and the intervals (`seed_task_bootstrap`, bootstrap.py) resample the tasks and each arm's seeds:
- `<arm>_minus_student` at the arm's chosen step (the validation sweep's choice);
- `grpo_opd_minus_grpo_only` at the chosen steps, and at every step both arms were scored at (equal steps).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from arc_experiments.learning.sweep_choice import evaluations, per_task_from_attempts
from arc_experiments.learning.bootstrap import seed_task_bootstrap

OPD, ONLY = "grpo-opd", "grpo-only"


def load_arms(arms_dir: str | Path) -> dict[str, dict[int, dict[int, dict[str, float]]]]:
    """{arm: {seed: {step: per-task pass@1}}} of every evaluated run in the arms folder's sweep manifest."""
    manifest = json.loads((Path(arms_dir) / "sweep_manifest.json").read_text())
    arms: dict[str, dict[int, dict[int, dict[str, float]]]] = {}
    for run in manifest["runs"]:
        config = yaml.safe_load(Path(run["config"]).read_text())
        steps = {step: per_task_from_attempts(path, config["eval_dataset"])
                 for step, path in evaluations(Path(run["output_dir"]))}
        steps = {step: per_task for step, per_task in steps.items() if per_task}
        if steps:
            arms.setdefault(run["variant"], {})[int(config["seed"])] = steps
    return arms


def _mean(per_task: dict[str, float]) -> float:
    return sum(per_task.values()) / len(per_task)


def _runs(arms, arm: str, step: int) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """(per-task pass@1 at `step`, at step 0) of each seed of `arm` evaluated at both."""
    seeds = sorted(s for s in arms[arm] if step in arms[arm][s] and 0 in arms[arm][s])
    return [arms[arm][s][step] for s in seeds], [arms[arm][s][0] for s in seeds]


def _gain(arms, arm: str, step: int, base: str | None = None, base_step: int | None = None,
          n_resamples: int = 10_000) -> dict[str, Any]:
    """Seed-aware interval of arm@step minus its start (minus base@base_step minus its start, when given)."""
    runs, starts = _runs(arms, arm, step)
    base_runs, base_starts = _runs(arms, base, base_step) if base is not None else ([], [])
    return seed_task_bootstrap(runs, starts, base_runs, base_starts, n_resamples=n_resamples,
                               names=(f"{arm}@{step}", f"{base}@{base_step}" if base else "its start"))


def summarize(arms, chosen: dict[str, int], n_resamples: int = 10_000) -> dict[str, Any]:
    """The summary's figures (see the module docstring); pass@1 values are means over seeds and tasks."""
    for arm in (OPD, ONLY):
        if arm not in arms:
            raise SystemExit(f"arms_report: no evaluated run of arm {arm!r} (arms: {sorted(arms)})")
        if arm not in chosen:
            raise SystemExit(f"arms_report: --chosen-steps names no step for {arm!r}")
    starts = [steps[0] for runs in arms.values() for steps in runs.values() if 0 in steps]
    per_seed = {arm: {str(seed): {str(step): round(_mean(pt), 4) for step, pt in sorted(steps.items())}
                      for seed, steps in sorted(runs.items())} for arm, runs in arms.items()}

    def pass1(arm: str, step: int) -> float:
        values = [_mean(steps[step]) for steps in arms[arm].values() if step in steps]
        return sum(values) / len(values)

    def ci(result: dict[str, Any]) -> dict[str, Any]:
        return {"mean": result["mean_diff"], "ci95": result["ci"], "n_seeds": result["n_seeds"],
                "n_tasks": result["n_tasks"]}

    common = sorted(set.intersection(*(set(steps) for runs in arms.values() for steps in runs.values())) - {0})
    return {
        "heldout_tasks": len(starts[0]),
        "seeds": sorted({seed for runs in arms.values() for seed in runs}),
        "chosen_steps": chosen,
        "student_pass1": sum(_mean(s) for s in starts) / len(starts),
        "student_pass1_per_run": [round(_mean(s), 4) for s in starts],
        "grpo_opd_pass1": pass1(OPD, chosen[OPD]),
        "grpo_only_pass1": pass1(ONLY, chosen[ONLY]),
        "per_seed_pass1": per_seed,
        "grpo_opd_minus_student": ci(_gain(arms, OPD, chosen[OPD], n_resamples=n_resamples)),
        "grpo_only_minus_student": ci(_gain(arms, ONLY, chosen[ONLY], n_resamples=n_resamples)),
        "grpo_opd_minus_grpo_only": ci(_gain(arms, OPD, chosen[OPD], ONLY, chosen[ONLY], n_resamples=n_resamples)),
        "grpo_opd_minus_grpo_only_equal_steps": {
            str(step): ci(_gain(arms, OPD, step, ONLY, step, n_resamples=n_resamples)) for step in common},
        "resampled": "tasks and seeds (each run's gain over its own step-0 evaluation)",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("arms_dir")
    parser.add_argument("--chosen-steps", nargs="+", default=[f"{ONLY}=40", f"{OPD}=40"], metavar="ARM=STEP",
                        help="each arm's step chosen on the validation tasks (default: 40 for both)")
    parser.add_argument("--out", help="write the summary (JSON)")
    args = parser.parse_args(argv)
    chosen = {}
    for item in args.chosen_steps:
        arm, _, step = item.partition("=")
        if not step.isdigit():
            parser.error(f"--chosen-steps {item!r}: expected ARM=STEP, e.g. grpo-opd=40")
        chosen[arm] = int(step)
    summary = summarize(load_arms(args.arms_dir), chosen)
    for arm, seeds in summary["per_seed_pass1"].items():
        for seed, steps in seeds.items():
            print(f"{arm:10s} seed {seed}: " + ", ".join(f"step {s} {100 * v:.1f}%" for s, v in steps.items()))
    for key in ("grpo_opd_minus_student", "grpo_only_minus_student", "grpo_opd_minus_grpo_only"):
        lo, hi = summary[key]["ci95"]
        print(f"{key:28s} {100 * summary[key]['mean']:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}]")
    for step, value in summary["grpo_opd_minus_grpo_only_equal_steps"].items():
        lo, hi = value["ci95"]
        print(f"grpo_opd_minus_grpo_only at step {step}: {100 * value['mean']:+.1f} points "
              f"[{100 * lo:+.1f}, {100 * hi:+.1f}]")
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
