"""Issue 41's figures from the committed run records (opd_records.py): each arm on the held-out tasks against the
student and against GRPO alone, and each teacher's gap to the student.

    python -m arc_experiments.learning.opd_report results/gpu_learning_smollm2/opd [--out summary.json]

- Recipes: each arm's (run, step) of highest validation pass@1 in its own sweep (`validation/ARM/`), the step
  included (`chosen_step`); the held-out runs must carry the chosen learning rate and teacher_tau (else ValueError).
- `arms[ARM]`, from `heldout/arms/`: `pass1` (mean over seeds and tasks at the chosen step), `minus_student` (each
  run's gain over its own step-0 evaluation: the student through the same path) and `minus_grpo_only` (the arm minus
  GRPO alone's at GRPO alone's chosen step; `minus_grpo_only_equal_step`: at the arm's step), each with a seed-aware
  t interval (seed_interval.py). `minus_student` is over each arm's runs; `minus_grpo_only` is paired by seed: per
  seed run by both (`minus_grpo_only_seeds`), the per-task difference of the arm's run at its step minus GRPO alone's
  run of that seed at its step, the interval of those per-seed differences taken as one arm (its seed part: their
  spread). The pair's runs share one step-0 evaluation (same student, same seed): differencing their gains would count
  its noise twice, differencing the levels cancels it. An arm with one paired seed takes the variance of the paired
  differences pooled over the arms with two. `seeds`; `wall_s`: the mean over seeds of the summed step times
  (`time/step`: generation, sandbox, teacher, weight sync, training; no start-up, no evaluation) of steps 1 to the
  chosen one, measured with a second run sharing the GPU (arc_experiments/gpu/opd_stages.py). `*_by_family`: the
  same differences (means over seeds) per synthetic task family: where a gain or a loss comes from.
  `reaches_grpo_only`: the acceptance's other test, on means (not paired by seed): the arm's first evaluated step
  whose pass@1 (mean over the seeds evaluated there, `seeds`; a cut run drops out of the steps it missed) is at least
  GRPO alone's `pass1` (to 1e-12), with the summed step times to it (mean over those seeds) and their fraction of
  GRPO alone's `wall_s` (`step` None: never reached). An RL-teacher arm also needs its teacher's training
  (`teacher_gaps`' `teacher_wall_s`), which the fraction leaves out.
- `teacher_gaps`: `opd-rl` (the RL-trained teacher: its held-out pass@1 at its last step minus the student's, both
  scored in its own run, one run: the interval covers tasks only; its `teacher_kl` on the student's own episodes at step
  1 of each run it teaches, before any update) and `opd-peer` (the live policy shown a peer: no pass@1 of its own;
  its step-1 teacher_kl over the episodes with a peer and the fraction of episodes without one). From the held-out
  part (the teacher those runs used), with the validation machine's in `validation_machine`. Machines that split
  the held-out seeds each train a teacher (`rl-teacher-s0`, ...): the figures are their means, the interval over
  tasks and teachers, each teacher's own under `teachers`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from arc_experiments.learning.arms_report import gain, run_gains
from arc_experiments.learning.opd_records import ARMS, CHOSEN_KEYS, CONTROL, RL_ARMS, TEACHER_GROUP, choose, \
    lost_runs, pass1, read_records
from arc_experiments.learning.seed_interval import METHOD, pooled_seed_variance, seed_interval

Records = dict[str, dict[str, Any]]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def task_family(task: str) -> str:
    """A synthetic task's family (`syn-FAMILY-...`, arc_trl/synthetic/generate.py; no family name has a hyphen), else
    `other` (e.g. an ARC task)."""
    parts = task.split("-")
    return parts[1] if parts[0] == "syn" and len(parts) > 2 else "other"


def by_family(per_task: dict[str, float]) -> dict[str, float]:
    """The mean of per-task values over each task family's tasks: where a gain or a shift comes from."""
    groups: dict[str, list[float]] = {}
    for task, value in per_task.items():
        groups.setdefault(task_family(task), []).append(value)
    return {family: _mean(values) for family, values in sorted(groups.items())}


def _seed_mean(per_seed: list[dict[str, float]]) -> dict[str, float]:
    """Per task, the mean over seeds of per-task values."""
    return {t: _mean([d[t] for d in per_seed]) for t in per_seed[0]}


def _interval(result: dict[str, Any]) -> list[float]:
    return [result["ci95"][0], result["ci95"][1]]


def _paired(per_task: dict[str, dict[int, dict[int, dict[str, float]]]], arm: str, step: int,
            control_step: int) -> tuple[list[int], list[dict[str, float]]]:
    """The seeds run by `arm` (evaluated at `step`) and by the control (at `control_step`), and per seed the per-task
    difference arm - control (module docstring)."""
    a, c = per_task[arm], per_task[CONTROL]
    seeds = sorted(s for s in a if s in c and step in a[s] and control_step in c[s])
    return seeds, [{t: v - c[s][control_step][t] for t, v in a[s][step].items()} for s in seeds]


def _summed_step_times(step_s: list[list[float | None]], step: int, who: str) -> list[float]:
    """Each run's summed step times of steps 1 to `step` (ValueError naming `who` when a run lacks one)."""
    times = [t[:step] for t in step_s]
    if any(len(t) < step or None in t for t in times):
        raise ValueError(f"{who}: a run without the step times of steps 1-{step}")
    return [sum(t) for t in times]


def reaches(per_task: dict[int, dict[int, dict[str, float]]], step_s: dict[int, list[float]], target: float,
            control_wall_s: float) -> dict[str, Any]:
    """`reaches_grpo_only` (module docstring) of one arm: `per_task[seed][step]`, `step_s[seed]` its runs' step
    times."""
    steps = sorted(set().union(*(set(steps) for steps in per_task.values())) - {0})
    out: dict[str, Any] = {"pass1_target": target, "step": None, "pass1": None, "wall_s": None, "wall_fraction": None,
                           "seeds": None}
    for step in steps:
        seeds = sorted(s for s, evaluated in per_task.items() if step in evaluated)
        value = _mean([_mean(list(per_task[s][step].values())) for s in seeds])
        if value >= target - 1e-12:  # pass@1 values are sums of fractions: equal means may differ in the last bit
            wall = _mean(_summed_step_times([step_s[s] for s in seeds], step, f"seeds {seeds}"))
            return out | {"step": step, "pass1": value, "wall_s": wall, "wall_fraction": wall / control_wall_s,
                          "seeds": seeds}
    return out


def arm_figures(records: Records, choices: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`arms` of the summary (module docstring) from the held-out runs' records."""
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for record in records.values():
        runs.setdefault(record["arm"], {})[record["seed"]] = record
    if CONTROL not in runs:
        raise ValueError(f"no held-out run of the control {CONTROL!r} (arms: {sorted(runs)})")
    for arm, seeds in runs.items():
        if arm not in choices:
            raise ValueError(f"held-out arm {arm!r} has no validation choice (choices: {sorted(choices)})")
        for record in seeds.values():
            wrong = {k: record["recipe"][k] for k in CHOSEN_KEYS if record["recipe"][k] != choices[arm]["recipe"][k]}
            if wrong:
                raise ValueError(f"held-out run {record['run']} ran {wrong}, not the validation choice "
                                 f"{choices[arm]['recipe']}")
    chosen = {arm: choices[arm]["step"] for arm in runs}
    per_task = {arm: {seed: {int(step): pass1(r, int(step)) for step in r["passes"]} for seed, r in seeds.items()}
                for arm, seeds in runs.items()}
    pooled = pooled_seed_variance([run_gains(per_task, arm, chosen[arm]) for arm in per_task])
    paired = pooled_seed_variance([_paired(per_task, arm, chosen[arm], chosen[CONTROL])[1] for arm in per_task
                                   if arm != CONTROL])
    out: dict[str, Any] = {}
    for arm in [a for a in ARMS if a in runs] + sorted(set(runs) - set(ARMS)):
        step = chosen[arm]
        seeds = sorted(s for s, steps in per_task[arm].items() if step in steps and 0 in steps)
        if not seeds:
            raise ValueError(f"held-out arm {arm!r}: no run evaluated at steps 0 and {step} (its chosen step)")
        sums = _summed_step_times([runs[arm][s]["per_step"]["step_s"] for s in seeds], step, f"held-out arm {arm!r}")
        student = gain(per_task, arm, step, pooled=pooled)
        row = {"pass1": _mean([_mean(list(per_task[arm][s][step].values())) for s in seeds]),
               "minus_student": student["mean"], "minus_student_ci95": _interval(student),
               "minus_grpo_only": None, "minus_grpo_only_ci95": None, "minus_grpo_only_equal_step": None,
               "seeds": seeds, "chosen_step": step, "wall_s": _mean(sums), "step_s": _mean([x / step for x in sums]),
               "minus_student_by_family": by_family(_seed_mean([
                   {t: v - per_task[arm][s][0][t] for t, v in per_task[arm][s][step].items()} for s in seeds])),
               "recipe": {k: v for k, v in runs[arm][seeds[0]]["recipe"].items() if k != "seed"},
               "per_seed_pass1": {str(s): {str(k): v for k, v in sorted(
                   (k, _mean(list(p.values()))) for k, p in per_task[arm][s].items())} for s in seeds}}
        if arm != CONTROL:
            both, diffs = _paired(per_task, arm, step, chosen[CONTROL])
            if not both:
                raise ValueError(f"held-out arm {arm!r}: no seed run by it and by {CONTROL} (seeds {seeds} and "
                                 f"{sorted(per_task[CONTROL])})")
            versus = seed_interval([diffs], pooled=paired, names=[f"{arm}@{step} - {CONTROL}@{chosen[CONTROL]}"])
            row["minus_grpo_only"], row["minus_grpo_only_ci95"] = versus["mean"], versus["ci"]
            row["minus_grpo_only_seeds"] = both
            row["minus_grpo_only_by_family"] = by_family(_seed_mean(diffs))
            equal_seeds, equal_diffs = _paired(per_task, arm, step, step)
            if equal_seeds:
                equal = seed_interval([equal_diffs], pooled=paired, names=[f"{arm}@{step} - {CONTROL}@{step}"])
                row["minus_grpo_only_equal_step"] = {"step": step, "mean": equal["mean"], "ci95": equal["ci"],
                                                     "seeds": equal_seeds}
        out[arm] = row
    for arm, row in out.items():
        if arm != CONTROL:
            times = {s: r["per_step"]["step_s"] for s, r in runs[arm].items()}
            row["reaches_grpo_only"] = reaches(per_task[arm], times, out[CONTROL]["pass1"], out[CONTROL]["wall_s"])
    return out


def _step1(records: list[dict[str, Any]], key: str) -> dict[str, float]:
    """{run: its step-1 value of `key`} of the records that logged it."""
    return {r["run"]: r["per_step"][key][0] for r in records if r["per_step"].get(key) and
            r["per_step"][key][0] is not None}


def _kl(records: list[dict[str, Any]], *keys: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        values = _step1(records, key)
        out[f"{key}_step1"] = _mean(list(values.values())) if values else None
        out[f"{key}_step1_runs"] = values
    return out


def _teacher_gap(teacher: dict[str, Any]) -> dict[str, Any]:
    """One RL-trained teacher's held-out pass@1 at its last step against its step 0 (the student), both in its run;
    `per_task`: the per-task difference."""
    last = max(int(s) for s in teacher["passes"])
    start, end = pass1(teacher, 0), pass1(teacher, last)
    diff = {t: end[t] - start[t] for t in start}
    per_step = teacher["per_step"]["step_s"]
    return {"teacher_steps": last, "teacher_pass1": _mean(list(end.values())),
            "student_pass1": _mean(list(start.values())), "teacher_minus_student": _mean(list(diff.values())),
            "teacher_pass1_by_step": {s: _mean(list(pass1(teacher, int(s)).values())) for s in teacher["passes"]},
            "teacher_recipe": {k: v for k, v in teacher["recipe"].items() if v is not None},
            "teacher_wall_s": sum(per_step[:last]) if len(per_step) >= last and None not in per_step[:last] else None,
            "teacher_minus_student_by_family": by_family(diff), "per_task": diff}


def _gaps(groups: dict[str, Records], part: str) -> dict[str, Any]:
    """Both teachers' gaps from one part's records (the machine that ran them)."""
    taught = [r for name, group in groups.items() if name != TEACHER_GROUP for r in group.values()]
    gaps: dict[str, Any] = {}
    teachers = sorted(groups.get(TEACHER_GROUP, {}).values(), key=lambda r: r["run"])
    rl_runs = [r for r in taught if r["arm"] in RL_ARMS]
    if teachers or rl_runs:
        gaps["opd-rl"] = _kl(rl_runs, "teacher_kl")
    scored = [t for t in teachers if "0" in t["passes"] and len(t["passes"]) > 1]
    if len({tuple(sorted(t["passes"], key=int)) for t in scored}) > 1:
        raise ValueError(f"teachers evaluated at different steps, not averaged: "
                         f"{ {t['run']: sorted(t['passes'], key=int) for t in scored} } (one stopped early?)")
    if scored:
        each = [_teacher_gap(t) for t in scored]
        diffs = [gap.pop("per_task") for gap in each]
        diff = seed_interval([diffs])  # several teachers (machines that split the seeds): their spread counts too
        walls = [gap["teacher_wall_s"] for gap in each]
        gaps["opd-rl"].update({
            "teacher_steps": each[0]["teacher_steps"], "teacher_pass1": _mean([g["teacher_pass1"] for g in each]),
            "student_pass1": _mean([g["student_pass1"] for g in each]), "teacher_minus_student": diff["mean"],
            "teacher_minus_student_ci95": diff["task_only_ci"] if len(each) == 1 else diff["ci"],
            "teacher_pass1_by_step": {s: _mean([g["teacher_pass1_by_step"][s] for g in each])
                                      for s in each[0]["teacher_pass1_by_step"]},
            "teacher_recipe": each[0]["teacher_recipe"],
            "teacher_minus_student_by_family": by_family(_seed_mean(diffs)),
            "teacher_wall_s": _mean(walls) if None not in walls else None})
        if len(each) > 1:
            gaps["opd-rl"]["teachers"] = {t["run"]: gap for t, gap in zip(scored, each)}
    peer = [r for r in taught if r["arm"] == "opd-peer"]
    if peer:
        gaps["opd-peer"] = _kl(peer, "teacher_kl", "teacher_missing_episode_frac")
    for gap in gaps.values():
        gap["measured_on"] = part
    return gaps


def teacher_gaps(records: dict[str, dict[str, Records]]) -> dict[str, Any]:
    """`teacher_gaps` (module docstring): the held-out machine's, with the validation machine's beside them."""
    heldout, validation = (_gaps(records.get(part, {}), part) for part in ("heldout", "validation"))
    if not heldout:
        return validation
    out = {name: dict(gap) for name, gap in heldout.items()}
    for name, gap in validation.items():
        out.setdefault(name, {})["validation_machine"] = gap
    return out


def summary(folder: str | Path) -> dict[str, Any]:
    """The summary's `arms` (when the held-out part is there), `teacher_gaps` and `opd_recipes` (the choices)."""
    records = read_records(Path(folder))
    if not records:
        raise FileNotFoundError(f"{folder}: no run record (validation/GROUP/RUN.json, heldout/GROUP/RUN.json)")
    validation = records.get("validation", {})
    choices = {arm: choose(validation[arm]) for arm in ARMS if arm in validation}
    out: dict[str, Any] = {}
    if "arms" in records.get("heldout", {}):
        out["arms"] = arm_figures(records["heldout"]["arms"], choices)
    out["teacher_gaps"] = teacher_gaps(records)
    out["opd_recipes"] = {arm: {k: c[k] for k in ("run", "step", "pass1", "recipe")} for arm, c in choices.items()}
    if lost_runs(validation):  # the choices above are provisional until these are run (opd-validation runs them)
        out["opd_validation_lost_runs"] = lost_runs(validation)
    out["opd_intervals"] = (f"{METHOD}; minus_student: each run's gain over its own step-0 evaluation; "
                            "minus_grpo_only: paired by seed, one arm of per-seed per-task differences (the arm's run "
                            "minus GRPO alone's run of the same seed, which shares its step-0 evaluation)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=Path, help="the records folder (validation/, heldout/)")
    parser.add_argument("--out", type=Path, help="write the summary (JSON)")
    args = parser.parse_args(argv)
    result = summary(args.records)
    for arm, c in result["opd_recipes"].items():
        print(f"{arm:13s} chosen on validation: {c['run']} step {c['step']} ({100 * c['pass1']:.1f}%)")
    for arm, row in result.get("arms", {}).items():
        lo, hi = row["minus_student_ci95"]
        line = f"{arm:13s} held-out {100 * row['pass1']:.1f}%  - student {100 * row['minus_student']:+.1f} " \
               f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"
        if row["minus_grpo_only"] is not None:
            lo, hi = row["minus_grpo_only_ci95"]
            line += f"  - GRPO alone {100 * row['minus_grpo_only']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        print(f"{line}  ({len(row['seeds'])} seeds, step {row['chosen_step']}, {row['wall_s']:.0f} s of steps)")
        if "reaches_grpo_only" in row:
            r = row["reaches_grpo_only"]
            when = "never" if r["step"] is None else \
                f"step {r['step']} ({100 * r['pass1']:.1f}%) in {r['wall_s']:.0f} s, {r['wall_fraction']:.2f}x its time"
            print(f"{'':13s} reaches GRPO alone's {100 * r['pass1_target']:.1f}%: {when}")
    print(json.dumps(result["teacher_gaps"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
