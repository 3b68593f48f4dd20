"""The learning result from an `arms` run (configs/gpu/smollm2/arms.yaml): every arm's runs, each scored in training
on the held-out tasks at several steps (step 0: the student, through the same path), with seed-aware intervals.

    python -m arc_experiments.learning.arms_report /tmp/arc-gpu/smollm2/arms --chosen-steps grpo-only=20 grpo-opd=40 \
        --out summary.json [--configs configs/gpu/smollm2]

Per run (an arm = a sweep variant, a seed = the run's `seed`) and step: per-task pass@1 from
`output_dir/eval_arc/step_N.jsonl` against the run's `eval_dataset`. Each run's gain is measured against its own step
0, and the intervals (seed_interval.py: a t interval with a task part and a seed part, Welch-Satterthwaite degrees of
freedom) cover the choice of tasks and of training seeds:
- `<arm>_minus_student` at the arm's chosen step (the validation sweep's choice);
- `grpo_opd_minus_grpo_only` at the chosen steps, and at every step both arms were scored at (equal steps).

The held-out check always runs (heldout_check.py): the runs' held-out set against the experiment's SFT, RL and
validation sets (`--configs`, default: the folder of the sweep's base config); the report is in the summary
(`heldout_check`), and an overlap makes the command exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from arc_experiments.learning.sweep_choice import evaluations, per_task_from_attempts
from arc_experiments.learning.seed_interval import METHOD, pooled_seed_variance, seed_interval

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


def run_gains(arms, arm: str, step: int) -> list[dict[str, float]]:
    """Per-task gain at `step` over the run's own step 0, of each seed of `arm` evaluated at both."""
    seeds = sorted(s for s in arms[arm] if step in arms[arm][s] and 0 in arms[arm][s])
    return [{t: v - arms[arm][s][0][t] for t, v in arms[arm][s][step].items()} for s in seeds]


def gain(arms, arm: str, step: int, base: str | None = None, base_step: int | None = None,
         pooled=None) -> dict[str, Any]:
    """arm@step minus its start (minus base@base_step minus its start, when given), with its seed-aware interval."""
    sides = [run_gains(arms, arm, step)] + ([run_gains(arms, base, base_step)] if base is not None else [])
    names = [f"{arm}@{step}"] + ([f"{base}@{base_step}"] if base is not None else [])
    result = seed_interval(sides, pooled=pooled, names=names)
    return {"mean": result["mean"], "ci95": result["ci"], "task_only_ci95": result["task_only_ci"],
            "se": result["se"], "df": result["df"], "n_seeds": result["n_runs"], "n_tasks": result["n_tasks"],
            "seed_part": result["seed_part"]}


def summarize(arms, chosen: dict[str, int], heldout_check: dict[str, Any] | None = None) -> dict[str, Any]:
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

    pooled = pooled_seed_variance([run_gains(arms, arm, chosen[arm]) for arm in (OPD, ONLY)])
    common = sorted(set.intersection(*(set(steps) for runs in arms.values() for steps in runs.values())) - {0})
    overlap = (heldout_check or {}).get("overlap")
    return {
        "heldout_tasks": len(starts[0]),
        "seeds": sorted({seed for runs in arms.values() for seed in runs}),
        "chosen_steps": chosen,
        "student_pass1": sum(_mean(s) for s in starts) / len(starts),
        "student_pass1_per_run": [round(_mean(s), 4) for s in starts],
        "grpo_opd_pass1": pass1(OPD, chosen[OPD]),
        "grpo_only_pass1": pass1(ONLY, chosen[ONLY]),
        "per_seed_pass1": per_seed,
        "grpo_opd_minus_student": gain(arms, OPD, chosen[OPD], pooled=pooled),
        "grpo_only_minus_student": gain(arms, ONLY, chosen[ONLY], pooled=pooled),
        "grpo_opd_minus_grpo_only": gain(arms, OPD, chosen[OPD], ONLY, chosen[ONLY], pooled=pooled),
        "grpo_opd_minus_grpo_only_equal_steps": {
            str(step): gain(arms, OPD, step, ONLY, step, pooled=pooled_seed_variance(
                [run_gains(arms, arm, step) for arm in (OPD, ONLY)])) for step in common},
        "interval": f"{METHOD}; each run's gain over its own step-0 evaluation",
        "heldout_check": heldout_check,
        "heldout_never_trained_on": None if overlap is None else not any(overlap.values()),
    }


def check_heldout(arms_dir: str | Path, configs: str | Path | None = None) -> dict[str, Any]:
    """The held-out check of an arms run: its runs' `eval_dataset` against the experiment's SFT, RL and validation
    sets (`configs`, default: the folder of the sweep's base config)."""
    from arc_experiments.learning.heldout_check import check
    from arc_experiments.learning.profile import heldout_against, load_profile

    manifest = json.loads((Path(arms_dir) / "sweep_manifest.json").read_text())
    configs = Path(configs) if configs else Path(manifest["base_config"]).parent
    heldout = {yaml.safe_load(Path(run["config"]).read_text())["eval_dataset"] for run in manifest["runs"]}
    if len(heldout) != 1:
        raise SystemExit(f"arms_report: the runs of {arms_dir} are scored on {len(heldout)} held-out sets: "
                         f"{sorted(heldout)}")
    return check(heldout.pop(), heldout_against(configs, load_profile(configs)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("arms_dir")
    parser.add_argument("--chosen-steps", nargs="+", default=[f"{ONLY}=40", f"{OPD}=40"], metavar="ARM=STEP",
                        help="each arm's step chosen on the validation tasks (default: 40 for both)")
    parser.add_argument("--out", help="write the summary (JSON)")
    parser.add_argument("--configs", help="the experiment's configs folder, for the held-out check (default: the "
                        "folder of the sweep's base config)")
    args = parser.parse_args(argv)
    chosen = {}
    for item in args.chosen_steps:
        arm, _, step = item.partition("=")
        if not step.isdigit():
            parser.error(f"--chosen-steps {item!r}: expected ARM=STEP, e.g. grpo-opd=40")
        chosen[arm] = int(step)
    summary = summarize(load_arms(args.arms_dir), chosen, check_heldout(args.arms_dir, args.configs))
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
    shared = {name: ids for name, ids in summary["heldout_check"]["overlap"].items() if ids}
    for name, ids in shared.items():
        print(f"held-out check: {len(ids)} held-out task(s) also in {name}: {', '.join(ids[:10])}", file=sys.stderr)
    return 1 if shared else 0


if __name__ == "__main__":
    raise SystemExit(main())
