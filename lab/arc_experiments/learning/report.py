"""The statistics of a learning run (`arc_experiments.learning.runner`): summary JSON, CI tables and the
pass@1-over-steps plot.

Input: the run's `results.json` (or several, one per GPU machine, joined by `merge.merge_results`), whose `heldout`
entries carry each evaluation's per-task pass@1 (`per_task`), `runs` maps each RL run to its arm, seed and checkpoint
evaluations, and `teachers` describes the teachers built (privileged or not, teacher_kl to the student).

- `summary(results)`: held-out pass@1 of the student, each arm (seeds pooled per task) and the OPD teacher; the
  seed-aware intervals (seed_interval.py: a t interval with a task part and a seed part) of GRPO+OPD - student,
  GRPO only - student and GRPO+OPD - GRPO only, each run against the student build it started from; the teacher
  comparison; the pass@1-over-steps curves with their interval bands; the acceptance checks of the experiment.
  `write_summary` writes it (results/gpu_learning_summary.json for the GPU profile).
- `ci_block(summary)`: the markdown of the docs block's statistics; `plot_curves`: the pass@1-over-steps figure.

All pass rates are fractions (0.25 = 25%).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arc_experiments.learning.bootstrap import pool_seeds
from arc_experiments.learning.seed_interval import CONFIDENCE, METHOD, pooled_seed_variance, seed_interval

ARMS = ("grpo-opd", "grpo-only")
ARM_TITLES = {"grpo-opd": "GRPO + OPD", "grpo-only": "GRPO only"}
# the experiment's bar: teacher >= 2x student, gain >= 5 points with a CI excluding 0, 256 tasks x 4, 2 seeds
MIN_TEACHER_RATIO, MIN_GAIN, MIN_TASKS, MIN_ATTEMPTS, MIN_SEEDS = 2.0, 0.05, 256, 4, 2
REQUIRED_KEYS = ("heldout_tasks", "attempts_per_task", "seeds", "student_pass1", "grpo_opd_pass1", "grpo_only_pass1",
                 "teacher_pass1", "grpo_opd_minus_student_ci95", "grpo_opd_minus_grpo_only_ci95", "steps", "device",
                 "date")


# ------------------------------------------------------------------------------------------------------ reading
def runs_of(results: dict[str, Any], arm: str) -> list[str]:
    """The RL runs of an arm, by seed. Results without a `runs` map (older runs): the run named like the arm."""
    runs = results.get("runs")
    if runs is None:
        return [arm] if arm in results.get("heldout", {}) else []
    return sorted((name for name, r in runs.items() if r["arm"] == arm), key=lambda n: runs[n]["seed"])


def student_evals(results: dict[str, Any]) -> list[str]:
    """The student's held-out evaluations: one, or one per machine that rebuilt it for its RL runs (merge_results);
    pooled per task like an arm's seeds, so that each seed's run is compared with the student it started from."""
    return [n for n in results.get("student_evals") or ["student"] if n in results.get("heldout", {})] or ["student"]


def start_of(results: dict[str, Any], run: str) -> str:
    """The student evaluation a run started from: the one that scored the very build the run recorded
    (`student_model`, the fingerprint of `arc_trl.models.model_identity`); for results without fingerprints, the one
    of the machine that ran it (merge_results records it), else the student. ValueError when the run's build was
    evaluated nowhere: pairing it with another build's evaluation would be the wrong baseline."""
    entry = results.get("runs", {}).get(run, {})
    wanted = entry.get("student_model")
    if wanted:
        matches = [n for n in student_evals(results) if results["heldout"].get(n, {}).get("model") == wanted]
        if not matches:
            raise ValueError(f"run {run}: the student build it started from ({wanted}) has no held-out evaluation in "
                             f"these results (student evaluations: {student_evals(results)})")
        return matches[0]
    return entry.get("student") or student_evals(results)[0]


def _per_task(results: dict[str, Any], name: str | None) -> dict[str, float] | None:
    entry = results.get("heldout", {}).get(name) if name else None
    return entry.get("per_task") if entry else None


def _final_eval(results: dict[str, Any], run: str) -> str | None:
    name = results.get("runs", {}).get(run, {}).get("final", run)
    return name if name in results.get("heldout", {}) else None


def _pass1(results: dict[str, Any], names: Sequence[str]) -> float | None:
    """Mean pass@1 of evaluations pooled per task (their solve rates' mean when per-task values are missing)."""
    entries = [results["heldout"][n] for n in names if n in results.get("heldout", {})]
    if not entries or len(entries) < len(names):
        return None
    per_task = [e.get("per_task") for e in entries]
    if all(per_task):
        pooled = pool_seeds(per_task, " + ".join(names))
        return sum(pooled.values()) / len(pooled)
    return sum(e["solve_rate"] for e in entries) / len(entries)


def _ci(value: dict[str, Any] | None, key: str = "ci") -> list[float] | None:
    return None if value is None else [float(x) for x in value[key]]


def _device(results: dict[str, Any]) -> str:
    devices = results.get("devices") or [results.get("device") or results.get("machine", "unknown")]
    return " + ".join(dict.fromkeys(devices))


# ------------------------------------------------------------------------------------------------------ summary
def _gains(results: dict[str, Any], pairs: list[tuple[str, str]]) -> list[dict[str, float]] | None:
    """Each (run, final evaluation)'s per-task gain over the student build the run started from; None when an
    evaluation lacks per-task values."""
    out = []
    for run, final in pairs:
        start = start_of(results, run)
        after, before = _per_task(results, final), _per_task(results, start)
        if not after or not before:
            return None
        pool_seeds([after, before], f"{final} / {start}")  # the same tasks, values in [0, 1]
        out.append({task: after[task] - before[task] for task in after})
    return out


def summary(results: dict[str, Any], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The experiment's numbers (module docstring); keys `REQUIRED_KEYS` plus extras. Missing arms give None."""
    heldout = results["heldout"]
    student = heldout["student"]
    n_tasks = student["n_tasks"]
    evaluated = {arm: [(r, e) for r in runs_of(results, arm) if (e := _final_eval(results, r))] for arm in ARMS}
    finals = {arm: [e for _, e in pairs] for arm, pairs in evaluated.items()}
    seeds = sorted({results["runs"][r]["seed"] for arm in ARMS for r in runs_of(results, arm)}) \
        if results.get("runs") else [results.get("seed", 0)]
    gains = {arm: _gains(results, pairs) if pairs else None for arm, pairs in evaluated.items()}
    gain_pool = pooled_seed_variance([g for g in gains.values() if g])
    levels = {arm: [_per_task(results, e) for e in names] for arm, names in finals.items()}
    level_pool = pooled_seed_variance([runs for runs in levels.values() if runs and all(runs)])

    def difference(*arms: str) -> dict[str, Any] | None:
        """The first arm's gain over its students minus the others' (seeds and machines pooled per task)."""
        sides = [gains[a] for a in arms]
        if not all(sides):
            return None
        return seed_interval(sides, pooled=gain_pool, confidence=confidence, names=arms)

    def band(names: list[str], pooled=None) -> dict[str, Any] | None:
        per_task = [_per_task(results, n) for n in names]
        if not names or not all(per_task):
            return None
        return seed_interval([per_task], pooled=pooled, confidence=confidence, names=[" + ".join(names)])

    def versus(a: list[str], b: list[str]) -> dict[str, Any] | None:
        pa, pb = [_per_task(results, n) for n in a], [_per_task(results, n) for n in b]
        if not a or not b or not all(pa) or not all(pb):
            return None
        return seed_interval([pa, pb], confidence=confidence, names=[" + ".join(a), " + ".join(b)])

    students = student_evals(results)
    opd_vs_student = difference("grpo-opd")
    opd_vs_only = difference("grpo-opd", "grpo-only")
    only_vs_student = difference("grpo-only")
    student_pass1 = _pass1(results, students)
    teachers = {}
    for name, spec in (results.get("teachers") or _legacy_teachers(results)).items():
        ev = spec.get("eval", name)
        pass1 = _pass1(results, [ev])
        teachers[name] = {
            "pass1": pass1, "pass1_ci95": _ci(band([ev])), "privileged": spec.get("privileged", "none"),
            "teacher_kl": spec.get("teacher_kl"), "teacher_kl_source": spec.get("teacher_kl_source"),
            "ratio_to_student": pass1 / student_pass1 if pass1 is not None and student_pass1 else None,
            "minus_student_ci95": _ci(versus([ev], students)),
        }
    opd_teacher = results.get("opd_teacher") or next(iter(teachers), None)
    steps = [r.get("steps") for r in results.get("runs", {}).values() if r.get("steps")]
    steps += [t["steps"][-1] for t in results.get("training", {}).values() if t.get("steps")] if not steps else []
    details = {"grpo_opd_minus_student": opd_vs_student, "grpo_opd_minus_grpo_only": opd_vs_only,
               "grpo_only_minus_student": only_vs_student}
    out: dict[str, Any] = {
        "heldout_tasks": n_tasks,
        "attempts_per_task": student["n_attempts"] // n_tasks,
        "seeds": seeds,
        "student_pass1": student_pass1,
        "grpo_opd_pass1": _pass1(results, finals["grpo-opd"]) if finals["grpo-opd"] else None,
        "grpo_only_pass1": _pass1(results, finals["grpo-only"]) if finals["grpo-only"] else None,
        "teacher_pass1": teachers[opd_teacher]["pass1"] if opd_teacher in teachers else None,
        "grpo_opd_minus_student_ci95": _ci(opd_vs_student),
        "grpo_opd_minus_grpo_only_ci95": _ci(opd_vs_only),
        "steps": max(steps) if steps else None,
        "device": _device(results),
        "date": results.get("date"),
        # extras
        "subject": results.get("subject"),
        "grpo_opd_minus_student": opd_vs_student["mean"] if opd_vs_student else None,
        "grpo_opd_minus_grpo_only": opd_vs_only["mean"] if opd_vs_only else None,
        "grpo_only_minus_student": only_vs_student["mean"] if only_vs_student else None,
        "grpo_only_minus_student_ci95": _ci(only_vs_student),
        "intervals": {key: _detail(value) for key, value in details.items() if value is not None},
        "student_pass1_ci95": _ci(band(students)),
        "student_evals": students,
        "grpo_opd_pass1_ci95": _ci(band(finals["grpo-opd"], level_pool)),
        "grpo_only_pass1_ci95": _ci(band(finals["grpo-only"], level_pool)),
        "per_seed_pass1": {arm: {str(results.get("runs", {}).get(r, {}).get("seed", results.get("seed", 0))):
                                 _pass1(results, [e]) for r, e in pairs} for arm, pairs in evaluated.items() if pairs},
        "opd_teacher": opd_teacher,
        "teachers": teachers,
        "curves": curves(results, confidence),
        "heldout_dataset": results.get("heldout_dataset"),
        "validation_dataset": results.get("validation_dataset"),
        "heldout_overlap": (results.get("heldout_check") or {}).get("overlap"),
        "statistics": {
            "confidence": confidence, "unit": "held-out task", "interval": METHOD,
            "differences": "each RL run's per-task gain over the student build it started from, arm minus arm",
            "claims": f"a difference's ci_excludes_zero check is measured only when each arm in it has >= {MIN_SEEDS} "
                      "runs of its own (with one run, its seed part is borrowed from the other arms)",
        },
    }
    out["checks"] = checks(out)
    return out


def _detail(value: dict[str, Any]) -> dict[str, Any]:
    """What an interval rests on: its task-only interval, standard error, degrees of freedom, runs per arm."""
    return {key: value[key] for key in ("mean", "ci", "task_only_ci", "se", "df", "n_runs", "seed_part",
                                        "seed_part_missing")}


def _legacy_teachers(results: dict[str, Any]) -> dict[str, Any]:
    """Results written before `teachers` existed: the one teacher, its teacher_kl the OPD run's first step."""
    if "teacher" not in results.get("heldout", {}):
        return {}
    kl = results.get("training", {}).get("grpo-opd", {}).get("teacher_kl") or [None]
    return {"teacher": {"eval": "teacher", "privileged": "none", "teacher_kl": kl[0],
                        "teacher_kl_source": "grpo-opd step 1"}}


def checks(s: dict[str, Any]) -> dict[str, bool | None]:
    """The experiment's bar, each True / False, or None when its numbers are missing (or, for a difference's
    interval, when an arm in it has fewer than MIN_SEEDS runs: its seed part is then not its own)."""

    def excludes_zero(key: str) -> bool | None:
        ci, detail = s[f"{key}_ci95"], s["intervals"].get(key)
        if ci is None or detail is None or min(detail["n_runs"]) < MIN_SEEDS:
            return None
        return ci[0] > 0 or ci[1] < 0

    teacher = s["teachers"].get(s["opd_teacher"] or "", {})
    ratio = teacher.get("ratio_to_student")
    gain = s["grpo_opd_minus_student"]
    return {
        "opd_teacher_ge_2x_student": None if ratio is None else ratio >= MIN_TEACHER_RATIO,
        "grpo_opd_gain_ge_5_points": None if gain is None else gain >= MIN_GAIN,
        "grpo_opd_minus_student_ci_excludes_zero": excludes_zero("grpo_opd_minus_student"),
        "grpo_opd_minus_grpo_only_ci_excludes_zero": excludes_zero("grpo_opd_minus_grpo_only"),
        "heldout_ge_256_tasks_x_4_attempts": s["heldout_tasks"] >= MIN_TASKS and s["attempts_per_task"] >= MIN_ATTEMPTS,
        # every arm evaluated at the end of at least 2 training seeds (the seeds run, pooled, are not enough)
        "seeds_ge_2": all(len(s["per_seed_pass1"].get(arm, {})) >= MIN_SEEDS for arm in ARMS),
        "heldout_never_trained_on": None if s["heldout_overlap"] is None else not any(s["heldout_overlap"].values()),
    }


def curves(results: dict[str, Any], confidence: float = CONFIDENCE) -> dict[str, list[dict[str, Any]]]:
    """Per arm, held-out pass@1 over RL steps: step 0 is the student, then each evaluated checkpoint and the final
    model; each point pools the runs evaluated at that step, with its seed-aware interval (a one-run point takes the
    run-to-run variance pooled over the arms at that step)."""
    runs = results.get("runs") or {}
    by_arm: dict[str, dict[int, list[str]]] = {}
    for arm in ARMS:
        names = runs_of(results, arm)
        if not names or not runs:
            continue
        by_step: dict[int, list[str]] = {0: student_evals(results)}
        for run in names:
            info = runs[run]
            for step, ev in info.get("checkpoints", {}).items():
                by_step.setdefault(int(step), []).append(ev)
            if info.get("final") and info.get("steps"):
                by_step.setdefault(int(info["steps"]), []).append(info["final"])
        by_arm[arm] = {step: [e for e in evs if _per_task(results, e)] for step, evs in sorted(by_step.items())}
    pools = {step: pooled_seed_variance([[_per_task(results, e) for e in steps[step]] for steps in by_arm.values()
                                         if steps.get(step)]) for step in {s for v in by_arm.values() for s in v}}
    out: dict[str, list[dict[str, Any]]] = {}
    for arm, steps in by_arm.items():
        points = []
        for step, evs in steps.items():
            if not evs:
                continue
            ci = seed_interval([[_per_task(results, e) for e in evs]], pooled=pools[step], confidence=confidence,
                               names=[f"{arm}@{step}"])
            points.append({"step": step, "pass1": ci["mean"], "ci95": ci["ci"], "n_seeds": len(evs)})
        out[arm] = points
    return out


def write_summary(results: dict[str, Any], path: str | Path, **kwargs: Any) -> dict[str, Any]:
    out = summary(results, **kwargs)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=2) + "\n")
    return out


# ------------------------------------------------------------------------------------------------------ text
def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _points(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}"


def _interval(ci: list[float] | None, points: bool = False) -> str:
    if ci is None:
        return "-"
    fmt = _points if points else _pct
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def ci_block(s: dict[str, Any], with_checks: bool = True) -> str:
    """Markdown: the held-out pass@1 of each arm with its CI, the paired differences and the teacher comparison
    (`with_checks`: and the line of the experiment's acceptance checks)."""
    n_seeds = len(s["seeds"])
    seeds = f"{n_seeds} training seed{'s' if n_seeds != 1 else ''} ({', '.join(map(str, s['seeds']))})"
    conf = round(100 * s["statistics"]["confidence"])
    lines = [
        f"Held-out pass@1 over {s['heldout_tasks']} tasks x {s['attempts_per_task']} attempts, {seeds} averaged per "
        f"task; {conf}% intervals: t intervals whose variance adds a task part (paired over tasks for differences) "
        "and a seed part (the variance of the runs' means; an arm with one run borrows it from the arms with more), "
        "Welch-Satterthwaite degrees of freedom (arc_experiments/learning/seed_interval.py); each RL run is compared "
        "with the student build it started from.",
        "",
        f"| held-out pass@1 | mean | {conf}% CI |",
        "|---|---|---|",
        f"| student (SFT, before RL) | {_pct(s['student_pass1'])} | {_interval(s['student_pass1_ci95'])} |",
    ]
    for arm, key in (("grpo-opd", "grpo_opd"), ("grpo-only", "grpo_only")):
        if s[f"{key}_pass1"] is not None:
            per_seed = s["per_seed_pass1"].get(arm, {})
            shown = ", ".join(f"{k}: {_pct(v)}" for k, v in per_seed.items())
            detail = f" (seeds: {shown})" if len(per_seed) > 1 else ""
            lines.append(f"| after {ARM_TITLES[arm]}{detail} | {_pct(s[f'{key}_pass1'])} | "
                         f"{_interval(s[f'{key}_pass1_ci95'])} |")
    lines += ["", f"| paired difference (points) | mean | {conf}% CI, tasks and seeds | tasks only | runs per arm |",
              "|---|---|---|---|---|"]
    for label, key in (("GRPO + OPD - student", "grpo_opd_minus_student"),
                       ("GRPO + OPD - GRPO only", "grpo_opd_minus_grpo_only"),
                       ("GRPO only - student", "grpo_only_minus_student")):
        if s[key] is not None:
            detail = s["intervals"][key]
            runs = " / ".join(f"{n}{'' if n >= MIN_SEEDS else ' (seed part borrowed)'}" for n in detail["n_runs"])
            lines.append(f"| {label} | {_points(s[key])} | {_interval(s[f'{key}_ci95'], points=True)} | "
                         f"{_interval(detail['task_only_ci'], points=True)} | {runs} |")
    if s["teachers"]:
        lines += ["", "| teacher | prompt | held-out pass@1 | x student | teacher_kl to the student |",
                  "|---|---|---|---|---|"]
        for name, t in s["teachers"].items():
            prompt = "student prompt" if t["privileged"] == "none" else f"privileged ({t['privileged']})"
            mark = " (OPD teacher)" if name == s["opd_teacher"] else ""
            ratio = "-" if t["ratio_to_student"] is None else f"{t['ratio_to_student']:.2f}"
            kl = "-" if t["teacher_kl"] is None else f"{t['teacher_kl']:.3f}"
            if t.get("teacher_kl_source"):
                kl += f" ({t['teacher_kl_source']})"
            held_out = "not evaluated" if t["pass1"] is None else f"{_pct(t['pass1'])} {_interval(t['pass1_ci95'])}"
            lines.append(f"| {name}{mark} | {prompt} | {held_out} | {ratio} | {kl} |")
    if not with_checks:
        return "\n".join(lines)
    failed = [k for k, v in s["checks"].items() if v is False]
    unknown = [k for k, v in s["checks"].items() if v is None]
    lines += ["", "Checks: " + ", ".join(f"{k} {'yes' if v else 'no' if v is False else '-'}"
                                                    for k, v in s["checks"].items()) + "."]
    if failed or unknown:
        lines.append(f"Not met: {', '.join(failed) or 'none'}; not measured: {', '.join(unknown) or 'none'}.")
    return "\n".join(lines)


def plot_curves(curve: dict[str, list[dict[str, Any]]], path: str | Path, title: str = "Held-out pass@1 over GRPO "
                "steps") -> None:
    """Held-out pass@1 over steps per arm, with its seed-aware interval as a band."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for (arm, points), color in zip(curve.items(), ("tab:blue", "tab:orange", "tab:green")):
        if not points:
            continue
        steps = [p["step"] for p in points]
        ax.plot(steps, [100 * p["pass1"] for p in points], color=color, marker="o", linewidth=2,
                label=f"{ARM_TITLES.get(arm, arm)} ({points[-1]['n_seeds']} seed(s) at step {points[-1]['step']}; "
                      "step 0: the student builds)")
        ax.fill_between(steps, [100 * p["ci95"][0] for p in points], [100 * p["ci95"][1] for p in points],
                        color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel("GRPO step (0: the SFT student)")
    ax.set_ylabel("held-out pass@1 (%), 95% CI band")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")
