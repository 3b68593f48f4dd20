"""Issue 41's OPD experiment as small files to commit: one record per training run, from which every figure is
recomputed (opd_report.py), and the held-out runs' sweep file written from the validation choices.

    python -m arc_experiments.learning.opd_records write WORK/opd --part validation --out OUT/opd
    python -m arc_experiments.learning.opd_records arms-file --validation results/gpu_learning_smollm2/opd/validation \
        --template configs/gpu/smollm2/opd-heldout.yaml --out WORK/opd/heldout.yaml

A run's in-training evaluations (`output_dir/eval_arc/step_N.jsonl`, ~5 MB each with the prompts) become per-task
counts of passed attempts; its trainer_state.json's per-step log gives the step times and teacher metrics. A record:
`{"run", "group", "arm", "seed", "recipe", "dataset", "attempts", "passes": {step: {task: passed}}, "incomplete_steps",
"per_step": {key: [value of step 1, 2, ...]}, "finished", "seconds"}` and, from the GPU stage's queue
(arc_experiments/gpu/opd_stages.py, kept when the record is written again), `"exit_code"` (124: stopped at its time
limit) and `"neighbours"` (the runs that shared the GPU with it: what its step times were measured beside), written as
OUT/PART/GROUP/RUN.json, where
PART is `validation` (the recipe choice) or `heldout` (the result) and GROUP a sweep folder: `teacher` (the RL-trained
teacher), an arm's validation sweep (`grpo-only`, `opd-peer`, `opd-rl-pure`, `opd-rl-mixed`) or `arms` (held-out).
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from arc_experiments.learning.sweep_choice import attempt_counts, evaluations

CONTROL = "grpo-only"
ARMS = (CONTROL, "opd-peer", "opd-rl-pure", "opd-rl-mixed")
RL_ARMS = ("opd-rl-pure", "opd-rl-mixed")  # taught by the RL-trained teacher
PARTS = ("validation", "heldout")
TEACHER_GROUP = "teacher"
RECIPE_KEYS = ("learning_rate", "teacher_tau", "adv_tau", "teacher_backend", "teacher_privileged", "teacher_model",
               "max_steps", "seed", "temperature", "vllm_gpu_memory_utilization")
CHOSEN_KEYS = ("learning_rate", "teacher_tau")  # what the validation sweeps vary (with the step)
QUEUE_KEYS = ("exit_code", "neighbours")  # added by the GPU stage's queue as the run ends
PER_STEP = {"time/step": "step_s", "time/teacher": "teacher_s", "reward": "reward", "teacher_kl": "teacher_kl",
            "teacher_missing_episode_frac": "teacher_missing_episode_frac"}


@functools.cache
def _tasks(dataset: str) -> dict:
    from arc_trl.tasks import load_tasks

    return {t.id: t for t in load_tasks(dataset)}


def run_record(name: str, group: str, arm: str, config: dict[str, Any], output_dir: Path) -> dict[str, Any]:
    """The record of one run (module docstring). An evaluation with a task short of `eval_n_predictions` attempts
    (stopped mid-way) is listed in `incomplete_steps`, not counted."""
    dataset, attempts = config.get("eval_dataset"), int(config.get("eval_n_predictions") or 0)
    passes: dict[str, dict[str, int]] = {}
    incomplete = []
    for step, path in evaluations(output_dir) if dataset else []:
        counts = attempt_counts(path, dataset, _tasks(dataset))
        if counts and all(n == attempts for n, _ in counts.values()):
            passes[str(step)] = {task: c for task, (_, c) in counts.items()}
        else:
            incomplete.append(step)
    state_file, summary_file = output_dir / "trainer_state.json", output_dir / "run_summary.json"
    per_step: dict[str, list[float | None]] = {short: [] for short in PER_STEP.values()}
    if state_file.exists():
        logs = [h for h in json.loads(state_file.read_text())["log_history"] if "time/step" in h]
        for h in sorted(logs, key=lambda h: h["step"]):
            for key, short in PER_STEP.items():
                per_step[short].append(h.get(key))
    summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
    return {"run": name, "group": group, "arm": arm, "seed": int(config.get("seed", 0)),
            "recipe": {k: config.get(k) for k in RECIPE_KEYS}, "dataset": dataset, "attempts": attempts,
            "passes": passes, "incomplete_steps": incomplete, "per_step": per_step,
            "finished": summary_file.exists(), "seconds": summary.get("seconds")}


def ran_here(output_dir: Path) -> bool:
    """Whether a run has trained in `output_dir` (its trainer state, an evaluation or its summary; the sweep's dry
    run writes only its config there)."""
    return any((output_dir / name).exists() for name in ("trainer_state.json", "eval_arc", "run_summary.json"))


def sweep_records(sweep_dir: Path, group: str, arm: str | None = None,
                  keep: Callable[[str, Path], bool] | None = None) -> list[dict[str, Any]]:
    """The records of a sweep folder's runs (`sweep_manifest.json`); `arm`: the folder's arm, else each variant;
    `keep(run name, output folder)`: only those runs."""
    manifest = json.loads((sweep_dir / "sweep_manifest.json").read_text())
    records = []
    for run in manifest["runs"]:
        output_dir, config_path = Path(run["output_dir"]), Path(run["config"])
        # the run's folder in a copied sweep (e.g. a lost machine's work, unpacked here) wins where the run trained in
        # it: the manifest's path may hold another machine's older tree
        copied = sweep_dir / run["name"]
        if copied != output_dir and (ran_here(copied) or not output_dir.is_dir() and copied.is_dir()):
            output_dir, config_path = copied, copied / config_path.name
        if keep is not None and not keep(run["name"], output_dir):
            continue
        config = yaml.safe_load(config_path.read_text())
        records.append(run_record(run["name"], group, arm or run["variant"], config, output_dir))
    return records


def machine_groups(work: Path, part: str) -> dict[str, tuple[Path, str | None]]:
    """GROUP -> (sweep folder on the machine, its arm or None: each run's variant) of a part of the experiment."""
    groups = {TEACHER_GROUP: (work / "teacher", "rl-teacher")}
    if part == "validation":
        groups.update({arm: (work / "validation" / arm, arm) for arm in ARMS})
    else:
        groups["arms"] = (work / "heldout" / "arms", None)
    return groups


def write_records(work: Path, part: str, out: Path, teacher_run: str | None = None) -> list[Path]:
    """Every run's record of `part` under OUT/PART/GROUP/RUN.json (sweep folders not there yet are skipped);
    `teacher_run`: the teacher's record under that name (a held-out machine that ran some seeds only)."""
    written = []
    for group, (folder, arm) in machine_groups(work, part).items():
        if not (folder / "sweep_manifest.json").exists():
            continue
        # a run that never trained here and has no record from the queue (e.g. kept from a committed record, so never
        # started) gets none: an empty one would hide the committed record when the two are merged
        def keep(name: str, output_dir: Path, group: str = group) -> bool:
            return ran_here(output_dir) or (out / part / group / f"{name}.json").exists()

        for record in sweep_records(folder, group, arm, keep):
            if group == TEACHER_GROUP and teacher_run:
                record["run"] = teacher_run
            written.append(save_record(record, out, part))
    return written


def save_record(record: dict[str, Any], out: Path, part: str) -> Path:
    """Write a run's record as OUT/PART/GROUP/RUN.json (the QUEUE_KEYS of a record already there are kept)."""
    path = out / part / record["group"] / f"{record['run']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        before = json.loads(path.read_text())
        record = {**{k: before[k] for k in QUEUE_KEYS if k in before}, **record}
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def read_records(folder: Path) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """{part: {group: {run: record}}} of a records folder (OUT/opd or results/gpu_learning_smollm2/opd)."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for path in sorted(Path(folder).glob("*/*/*.json")):
        part, group = path.parent.parent.name, path.parent.name
        if part in PARTS:
            out.setdefault(part, {}).setdefault(group, {})[path.stem] = json.loads(path.read_text())
    return out


def finished_runs(groups: dict[str, dict[str, dict[str, Any]]]) -> set[tuple[str, str]]:
    """(group, run) of a part's records whose run finished with exit code 0 (a record without one: finished)."""
    return {(g, name) for g, runs in groups.items() for name, r in runs.items()
            if r.get("finished") and r.get("exit_code", 0) == 0}


def lost_runs(groups: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """GROUP/RUN of a part's records whose run did not finish (a failed start, a stop at its limit)."""
    done = finished_runs(groups)
    return sorted(f"{g}/{name}" for g, runs in groups.items() for name in runs if (g, name) not in done)


def pass1(record: dict[str, Any], step: int) -> dict[str, float]:
    """Per-task pass@1 of a record's evaluation at `step`."""
    return {task: c / record["attempts"] for task, c in record["passes"][str(step)].items()}


def choose(records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The recipe of a validation sweep: the (run, step) of highest mean validation pass@1; ties go to the fewer
    steps, then the run name (sweep_choice.py's rule). ValueError when no run has an evaluation."""
    ranking = []
    for name, record in records.items():
        for step in record["passes"]:
            per_task = pass1(record, int(step))
            ranking.append((-sum(per_task.values()) / len(per_task), int(step), name))
    ranking.sort()
    if not ranking:
        raise ValueError(f"no evaluated run among {sorted(records)}")
    best, step, name = ranking[0]
    return {"run": name, "step": step, "pass1": -best,
            "recipe": {k: records[name]["recipe"][k] for k in CHOSEN_KEYS},
            "ranking": [{"run": n, "step": s, "pass1": -v} for v, s, n in ranking]}


def show_lines(folder: Path) -> list[str]:
    """A records folder as a table: each run's end (finished, exit code), mean pass@1 (%) at each evaluated step, its
    mean teacher_kl (nats a token) and teacher-missing fraction over the steps that logged them, its seconds."""

    def mean(values: list[Any]) -> str:
        values = [v for v in values if v is not None]
        return f"{sum(values) / len(values):.4f}" if values else "-"

    rows = []
    for part, groups in read_records(folder).items():
        for group, runs in groups.items():
            for name, r in runs.items():
                end = ("done" if r.get("finished") else "cut") + (
                    f" {r['exit_code']}" if r.get("exit_code") is not None else "")
                passes = {step: tasks for step, tasks in r.get("passes", {}).items() if tasks}
                steps = "  ".join(f"{step}: {100 * sum(pass1(r, int(step)).values()) / len(passes[step]):.1f}"
                                  for step in sorted(passes, key=int))
                per_step = r.get("per_step", {})
                rows.append((f"{part}/{group}/{name}", end, steps or "-", mean(per_step.get("teacher_kl", [])),
                             mean(per_step.get("teacher_missing_episode_frac", [])), f"{r.get('seconds') or '-'}"))
    width = max([len("part/group/run")] + [len(row[0]) for row in rows])
    header = ("part/group/run", "end", "pass@1 % by step", "teacher_kl", "missing", "seconds")
    return [f"{a:{width}s} {b:8s} {c:32s} {d:>10s} {e:>7s} {f:>7s}" for a, b, c, d, e, f in [header, *rows]]


def arms_file(template: Path, choices: dict[str, dict[str, Any]], out: Path) -> dict[str, Any]:
    """The held-out runs' sweep file: `template` with each arm's chosen learning rate and teacher_tau (SystemExit
    naming an arm of the template without a choice)."""
    sweep = yaml.safe_load(template.read_text())
    missing = [v["name"] for v in sweep["variants"] if v["name"] not in choices]
    if missing:
        raise SystemExit(f"{template}: no validation choice for {missing} (choices: {sorted(choices)}); run "
                         "`python -m arc_experiments.gpu opd-validation` first and commit its records")
    for variant in sweep["variants"]:
        variant.update(choices[variant["name"]]["recipe"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# {template} with the validation choices\n" + yaml.safe_dump(sweep, sort_keys=False))
    return sweep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="the runs' records of a part, from the machine's folder WORK/opd")
    write.add_argument("work", type=Path)
    write.add_argument("--part", choices=PARTS, required=True)
    write.add_argument("--out", type=Path, required=True)
    write.add_argument("--teacher-run", help="the teacher's record name (default: its run's, rl-teacher)")
    show = sub.add_parser("show", help="a records folder as a table (pass@1 by step, teacher figures)")
    show.add_argument("folder", type=Path, help="holds PART/GROUP/RUN.json, e.g. results/gpu_learning_smollm2/opd")
    arms = sub.add_parser("arms-file", help="the held-out runs' sweep file from the validation records' choices")
    arms.add_argument("--validation", type=Path, required=True, help="the validation records (PART folder)")
    arms.add_argument("--template", type=Path, required=True)
    arms.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "show":
        lines = show_lines(args.folder)
        print("\n".join(lines) if len(lines) > 1 else f"{args.folder}: no records (PART/GROUP/RUN.json)")
        return 0 if len(lines) > 1 else 1
    if args.command == "write":
        written = write_records(args.work, args.part, args.out, args.teacher_run)
        print(f"{len(written)} records under {args.out / args.part}")
        if args.part == "validation":  # this machine's best, for the log (the choice reads every committed record)
            groups = read_records(args.out).get("validation", {})
            for arm in [a for a in ARMS if a in groups]:
                if not any(r["passes"] for r in groups[arm].values()):
                    print(f"{arm:13s} no evaluated run here")
                    continue
                c = choose(groups[arm])
                print(f"{arm:13s} best here {c['run']} at step {c['step']} ({100 * c['pass1']:.1f}% validation)")
        return 0 if written else 1
    groups = read_records(args.validation.parent).get(args.validation.name, {})
    lost = lost_runs(groups)
    if lost:  # a recipe chosen without some of its sweep's runs is not the sweep's choice
        raise SystemExit(f"{args.validation}: validation runs {lost} did not finish; run them first (python -m "
                         "arc_experiments.gpu opd-validation reruns the sweeps that lost them), commit their records")
    choices = {arm: choose(groups[arm]) for arm in ARMS if arm in groups}
    sweep = arms_file(args.template, choices, args.out)
    for v in sweep["variants"]:
        print(f"{v['name']:13s} " + ", ".join(f"{k} {v[k]}" for k in CHOSEN_KEYS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
