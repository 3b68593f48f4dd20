"""results/gpu_learning_smollm2_summary.json from results/gpu_learning_smollm2/: every figure its committed files give,
and, for those they cannot give, which file is missing.

Inputs (under results/gpu_learning_smollm2/ unless said):
- teachers_results.json: machine 1's results.json: the student's and the privileged teacher's held-out evaluations
  (per-task pass@1), the teacher's teacher_kl probe, the held-out set, the date, the device;
- sweep_choice.json, sweep_temperature_choice.json: the validation sweeps' rankings (sweep_choice.py);
- arms_summary.json: arms_report's summary of the arms stage (3 seeds per arm, held-out pass@1 at steps 0, 20, 40),
  whose per-seed pass@1 are rounded to 4 digits: each is k / 1024 (256 tasks x 4 attempts), recovered exactly;
- arc_agi_1/eval-*/: per_attempt.jsonl and metrics.json of the ARC-AGI-1 evaluations (pass@k over the whole dataset,
  its size read from the bundled dataset itself);
- heldout_check.json: the held-out check (`python -m arc_experiments.learning.heldout_check --configs
  configs/gpu/smollm2`), run after the experiment, whose machines never ran it;
- summary_text.json: the words (the subject, the teacher, the commands, notes), no figures;
- machine1_queue.log (its first line: the GPU and the versions), configs/gpu/smollm2/arms.yaml and sweep.yaml;
- opd/ (when committed): issue 41's run records (arc_experiments/learning/opd_records.py), which give `arms`,
  `teacher_gaps`, `opd_recipes` and `opd_intervals` (opd_report.py).

Not recomputable: the intervals over the arms' held-out tasks. The per-task evaluations of the arms runs
(`OUT/arms/s{seed}_{arm}/eval_arc/step_N.jsonl`) were never committed and arms_summary.json holds per-seed means only,
so the task part of those intervals cannot be formed: their keys say "not recomputable: ...". The per-seed means do
give `*_seed_only_ci95`: the t interval over the 3 seeds with the 256 held-out tasks held fixed (its coverage: other
training seeds on these tasks, not other tasks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from arc_experiments.machine_logs import logs_of

FOLDER = "results/gpu_learning_smollm2"
CONFIGS = "configs/gpu/smollm2"
OPD, ONLY = "grpo-opd", "grpo-only"
MISSING = ("not recomputable: the per-task held-out evaluations of the arms runs (OUT/arms/s{0,1,2}_{grpo-only,"
           "grpo-opd}/eval_arc/step_{0,20,40}.jsonl) were never committed; results/gpu_learning_smollm2/"
           "arms_summary.json has per-seed means only")
INTERVALS = ("Differences are each run's gain over its own step-0 evaluation, means over 3 seeds and 256 held-out "
             "tasks. *_ci95 (tasks and seeds, arc_experiments/learning/seed_interval.py): " + MISSING + ". "
             "*_seed_only_ci95: the t interval over the seeds (Welch for arm minus arm) with the held-out tasks held "
             "fixed, from the per-seed means; it covers other training seeds on these 256 tasks, not other tasks. "
             "arms_summary.json's own intervals were percentile bootstraps over 3 seeds, which cannot reach beyond "
             "the seeds' range: they are not used.")


def _json(root: Path, name: str) -> Any:
    return json.loads((root / FOLDER / name).read_text())


def exact_pass1(value: float, n_attempts: int) -> float:
    """The pass@1 k / n_attempts that `value` (rounded to 4 digits) was; ValueError when no k rounds to it."""
    k = round(value * n_attempts)
    if round(k / n_attempts, 4) != value:
        raise ValueError(f"pass@1 {value} is not k / {n_attempts} rounded to 4 digits")
    return k / n_attempts


def _seed_only(*sides: list[float]) -> list[float]:
    """The t interval over seeds of mean(sides[0]) - mean(sides[1]) (or of mean(sides[0])), tasks held fixed."""
    from arc_experiments.learning.seed_interval import seed_interval

    return seed_interval([[{"the 256 tasks": v} for v in side] for side in sides])["ci"]


def arms_figures(arms: dict[str, Any], n_attempts: int) -> dict[str, Any]:
    """Pass@1 and gains of the arms stage from its per-seed means, checked against arms_summary.json's unrounded
    means; intervals: not recomputable, and the seed-only t intervals."""
    per_seed = {arm: {seed: {int(step): exact_pass1(v, n_attempts) for step, v in steps.items()}
                      for seed, steps in seeds.items()} for arm, seeds in arms["per_seed_pass1"].items()}
    chosen = {arm: int(step) for arm, step in arms["chosen_steps"].items()}

    def gains(arm: str, step: int) -> list[float]:
        return [steps[step] - steps[0] for _, steps in sorted(per_seed[arm].items())]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    starts = [steps[0] for seeds in per_seed.values() for steps in seeds.values()]
    out: dict[str, Any] = {
        "student_pass1": mean(starts),
        "grpo_opd_pass1": mean([s[chosen[OPD]] for s in per_seed[OPD].values()]),
        "grpo_only_pass1": mean([s[chosen[ONLY]] for s in per_seed[ONLY].values()]),
    }
    for key, sides in (("grpo_opd_minus_student", [gains(OPD, chosen[OPD])]),
                       ("grpo_opd_minus_grpo_only", [gains(OPD, chosen[OPD]), gains(ONLY, chosen[ONLY])]),
                       ("grpo_only_minus_student", [gains(ONLY, chosen[ONLY])])):
        out[key] = mean(sides[0]) - (mean(sides[1]) if len(sides) > 1 else 0.0)
        out[f"{key}_ci95"], out[f"{key}_seed_only_ci95"] = MISSING, _seed_only(*sides)
    steps = sorted(set.intersection(*(set(s) for seeds in per_seed.values() for s in seeds.values())) - {0})
    out["grpo_opd_minus_grpo_only_equal_steps"] = {
        str(step): {"mean": mean(gains(OPD, step)) - mean(gains(ONLY, step)), "ci95": MISSING,
                    "seed_only_ci95": _seed_only(gains(OPD, step), gains(ONLY, step))} for step in steps}
    recorded = {key: arms[key] for key in ("student_pass1", "grpo_opd_pass1", "grpo_only_pass1")}
    recorded.update({key: arms[key]["mean"] for key in ("grpo_opd_minus_student", "grpo_opd_minus_grpo_only",
                                                        "grpo_only_minus_student")})
    recorded.update({f"equal {s}": v["mean"] for s, v in arms["grpo_opd_minus_grpo_only_equal_steps"].items()})
    mine = {**{k: out[k] for k in recorded if k in out},
            **{f"equal {s}": v["mean"] for s, v in out["grpo_opd_minus_grpo_only_equal_steps"].items()}}
    wrong = [k for k in recorded if abs(recorded[k] - mine[k]) > 1e-9]
    if wrong:
        raise ValueError(f"{FOLDER}/arms_summary.json: its means {wrong} differ from its per-seed values'")
    return out


def arc_agi_1(root: Path, text: dict[str, Any]) -> dict[str, Any]:
    """Pass@1 and pass@2 of each ARC-AGI-1 evaluation over the whole dataset (unattempted tasks fail)."""
    from arc_experiments.learning.arc_agi_report import model_figures
    from arc_trl.tasks import load_tasks

    folders = sorted((p for p in (root / FOLDER / "arc_agi_1").glob("eval-*") if p.is_dir()),
                     key=lambda p: (p.name != "eval-student", p.name))  # the student first
    dataset = json.loads((folders[0] / "metrics.json").read_text())["dataset"]
    size = len(load_tasks(dataset))
    figures = {p.name.removeprefix("eval-"): model_figures(p, size) for p in folders}
    attempted = {f["attempted_tasks"] for f in figures.values()}
    out: dict[str, Any] = {"dataset": f"{dataset} ({text['dataset']})", "dataset_tasks": size,
                           "attempted_tasks": attempted.pop() if len(attempted) == 1 else sorted(attempted)}
    out["unattempted"] = f"{size - out['attempted_tasks']} tasks, {text['unattempted']}: counted as failures"
    for model, f in figures.items():
        for k in (1, 2):
            out[f"{model.replace('-', '_')}_pass{k}"] = f[f"pass{k}"]
    out["solved_task_ids"] = {model: f["solved_task_ids"] for model, f in figures.items()}
    return {**out, "best_arm": text["best_arm"], "results": f"{FOLDER}/arc_agi_1/"}


def temperature(root: Path, text: str) -> dict[str, Any]:
    """Each arm's best validation pass@1 at the sweep's temperature and at the temperature sweep's; the chosen T."""
    base = yaml.safe_load((root / CONFIGS / "grpo-opd.yaml").read_text())["temperature"]
    best = {}
    for name, default in (("sweep_choice.json", base), ("sweep_temperature_choice.json", None)):
        choice = _json(root, name)
        for arm, row in sorted(choice["best_per_arm"].items()):
            t = float(row["varied"].get("temperature", default))
            best.setdefault(f"T{t}", {})[arm] = {"run": row["name"], "step": row["step"],
                                                 "validation_pass1": row["pass1"]}
    winners = {max(best, key=lambda t: best[t][arm]["validation_pass1"]) for arm in (OPD, ONLY)}
    chosen = float(winners.pop()[1:]) if len(winners) == 1 else None
    return {"chosen": chosen, "validation_best": best, "note": text,
            "results": f"{FOLDER}/sweep_temperature_choice.json"}


def _device(root: Path) -> str:
    """`GPU (torch X, vllm Y, trl Z, transformers W)` from the first line of machine 1's queue log."""
    head = (logs_of(root / FOLDER) / "machine1_queue.log").read_text().splitlines()[0]
    fields = [f.strip() for f in head.split("|")]
    versions = ", ".join(f for f in fields if re.match(r"(torch|vllm|trl|transformers) ", f))
    return f"{fields[-1].split(',')[0]} ({versions})"


def summary(root: Path) -> dict[str, Any]:
    """The SmolLM2 summary (module docstring)."""
    text, teachers, arms = _json(root, "summary_text.json"), _json(root, "teachers_results.json"), \
        _json(root, "arms_summary.json")
    student, teacher = teachers["heldout"]["student"], teachers["heldout"]["teacher-privileged"]
    n_tasks, attempts = student["n_tasks"], student["n_attempts"] // student["n_tasks"]
    if arms["heldout_tasks"] != n_tasks:
        raise ValueError(f"{FOLDER}: arms_summary.json has {arms['heldout_tasks']} held-out tasks, the teachers' "
                         f"evaluations {n_tasks}")
    figures = arms_figures(arms, n_tasks * attempts)
    sweep = _json(root, "sweep_choice.json")
    check = _json(root, "heldout_check.json")
    if check["heldout"] != teachers["heldout_dataset"]:
        raise ValueError(f"{FOLDER}/heldout_check.json checks {check['heldout']}, not the held-out set "
                         f"{teachers['heldout_dataset']}")
    mean = {name: sum(e["per_task"].values()) / len(e["per_task"]) for name, e in (("student", student),
                                                                                   ("teacher", teacher))}
    kl = teachers["teachers"]["teacher-privileged"]
    validation = sweep["runs"][0]
    sweep_attempts = yaml.safe_load((root / CONFIGS / "sweep.yaml").read_text())["fixed"]["eval_n_predictions"]
    trained = yaml.safe_load((root / CONFIGS / "arms.yaml").read_text())["fixed"]["max_steps"]
    opd: dict[str, Any] = {}
    if (root / FOLDER / "opd").is_dir():  # issue 41's experiment, once its records are committed (opd_report.py)
        from arc_experiments.learning.opd_report import summary as opd_summary

        opd = opd_summary(root / FOLDER / "opd")
    return {
        "subject": text["subject"], "heldout_tasks": n_tasks, "attempts_per_task": attempts, "seeds": arms["seeds"],
        "student_pass1": figures["student_pass1"], "grpo_opd_pass1": figures["grpo_opd_pass1"],
        "grpo_only_pass1": figures["grpo_only_pass1"], "teacher_pass1": mean["teacher"],
        **{k: v for k, v in figures.items() if "minus" in k},
        "steps": {**{arm: row["step"] for arm, row in sorted(sweep["best_per_arm"].items())}, "trained": trained},
        "recipes": {**{arm: row["varied"] for arm, row in sorted(sweep["best_per_arm"].items())},
                    OPD: {**sweep["best_per_arm"][OPD]["varied"], "teacher": text["teacher"]}},
        "per_seed_pass1": arms["per_seed_pass1"],
        "teacher": {"heldout_pass1_with_hint": mean["teacher"], "student_heldout_pass1_separate_eval": mean["student"],
                    "teacher_over_student": round(mean["teacher"] / mean["student"], 2),
                    "teacher_kl_nats_per_token_on_student_episodes": round(kl["teacher_kl"], 4),
                    "teacher_kl_source": f"{kl['teacher_kl_source']} (the mean of its steps; the per-step values "
                                         "are in no committed file)"},
        "intervals": INTERVALS,
        "chosen_on": f"validation: {validation['validation_dataset']} ({validation['n_tasks']} tasks x "
                     f"{sweep_attempts} attempts, one run per recipe), {FOLDER}/sweep_choice.json and "
                     "sweep_temperature_choice.json",
        "heldout_dataset": teachers["heldout_dataset"],
        "heldout_check": check,
        "heldout_never_trained_on": not any(check["overlap"].values()),
        "arc_agi_1": arc_agi_1(root, text["arc_agi_1"]),
        "device": _device(root), "date": teachers["date"], "commands": text["commands"],
        "temperature": temperature(root, text["temperature"]),
        **opd,
        "written_by": f"python -m arc_experiments.figures (arc_experiments/figures/smollm2.py) from {FOLDER}/",
    }
