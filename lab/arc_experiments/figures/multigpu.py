"""results/gpu_multigpu_summary.json from the files `python -m arc_experiments.gpu multigpu` brought back, committed
under results/gpu_multigpu/MACHINE/ (one folder per machine, each row against its own machine's one-GPU step where
it ran one): each
layout's record (layout_NAME.json: its run summary's per-step time budget, the per-GPU peak memory nvidia-smi saw,
the command), the drills (drills.json), the per-engine weight check (engine_check.json), the learning subject's arms
(server_learning_ARM.json[.gz]); and results/gpu_multigpu/lora_drift.json, the base drift of 100 LoRA syncs
(benchmarks/lora_drift_bench.py, CPU)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from arc_experiments.figures.records import load_record, record_paths
from arc_experiments.machine_logs import checkout_path, logs_of

FOLDER = "results/gpu_multigpu"
BASELINE = "1gpu-colocate"
MIB_PER_GIB = 1024


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def measured_steps(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The logged steps after the first (the first carries one-time compilation and warm-up)."""
    steps = (record.get("run_summary") or {}).get("per_step") or []
    return [step for step in steps if step.get("step", 0) >= 2]


def first_step_s(record: dict[str, Any]) -> float | None:
    steps = (record.get("run_summary") or {}).get("per_step") or []
    return next((round(s["time/step"], 3) for s in steps if s.get("step") == 1 and "time/step" in s), None)


def logged_steps(log: Path) -> list[dict[str, float]]:
    """Every training step's figures a trainer log printed (the lines of TRL's logged dicts with `time/step`)."""
    steps = []
    for line in log.read_text(errors="replace").splitlines():
        found = dict(re.findall(r"'([a-z_]+/[a-z_/]+)': '([0-9.e+-]+)'", line))
        if "time/step" in found:
            steps.append({key: float(value) for key, value in found.items()})
    return steps


OFF_POLICY_METRICS = ("sampling/sampling_logp_difference/mean", "sampling/importance_sampling_ratio/min",
                      "sampling/importance_sampling_ratio/max", "sampling/masked_episode_frac",
                      "sampling/clipped_episode_frac", "async/policy_lag", "async/dropped_rollouts")


def off_policy(log: Path) -> dict[str, dict[str, float]] | None:
    """What the importance-sampling correction saw over a run's steps, from its trainer log: for each of
    OFF_POLICY_METRICS the run logged, the mean and the extreme (min for the ratio's minimum, else max) over steps."""
    if not log.exists():
        return None
    steps = logged_steps(log)
    found = {}
    for key in OFF_POLICY_METRICS:
        values = [step[key] for step in steps if key in step]
        if values:
            extreme = min(values) if key.endswith("/min") else max(values)
            found[key] = {"mean": round(sum(values) / len(values), 4), "extreme": round(extreme, 4)}
    return found


def partial_row(name: str, gpus: int, log: Path, baseline_step_s: float | None, baseline_first_s: float | None,
                why: str) -> dict[str, Any]:
    """A layout whose machine was lost before it wrote its record: the steps its trainer log printed. Its steps after
    the first are measured as a record's are (their mean, against the same machine's one-GPU step); with none, its
    first step stands beside the one-GPU first step (both include one-time warm-up)."""
    logged = logged_steps(log)
    first, measured = (logged[0] if logged else {}), logged[1:]
    parts = measured or [first]

    def part(key: str) -> float | None:
        return _mean([step[key] for step in parts if key in step])

    step_s = _mean([step["time/step"] for step in measured])
    first_s = first.get("time/step")
    return {
        "layout": name, "gpus": gpus, "steps_measured": len(measured), "step_s": step_s,
        "same_machine_1gpu_step_s": baseline_step_s,
        "speedup": round(baseline_step_s / step_s, 3) if step_s and baseline_step_s else None,
        "first_step_s": first_s, "same_machine_1gpu_first_step_s": baseline_first_s,
        "first_step_speedup": round(baseline_first_s / first_s, 3) if first_s and baseline_first_s else None,
        "generate_s": part("time/generate"), "teacher_s": part("time/teacher"),
        "train_s": part("time/train"), "weight_sync_s": part("time/weight_sync"), "note": why,
        "log": checkout_path(log),
    }


ASYNC_METRICS = ("async/policy_lag", "async/policy_lag_max", "async/dropped_rollouts", "async/wait_s")


def busy_fractions(trace: list[list[float]], start: float, end: float) -> dict[str, float | None]:
    """Each GPU's mean utilization between `start` and `end` (Unix times) as a fraction of 1: nvidia-smi's share of
    the sampling interval in which a kernel ran, so a GPU waiting on another reads near 0."""
    per_gpu: dict[str, list[float]] = {}
    for t, gpu, util in trace:
        samples = per_gpu.setdefault(str(int(gpu)), [])
        if start <= t <= end:
            samples.append(util)
    return {gpu: round(sum(u) / len(u) / 100, 3) if u else None for gpu, u in per_gpu.items()}


def measured_busy(record: dict[str, Any]) -> dict[str, float | None] | None:
    """The layout's GPUs' busy fractions over its measured steps (from the end of step 1 to the end of the last),
    None for a record without a utilization trace or step end times."""
    ends = (record.get("run_summary") or {}).get("step_end_unix") or []
    trace = record.get("gpu_util_trace") or []
    if len(ends) < 2 or not trace:
        return None
    return busy_fractions(trace, ends[0], ends[-1])


def busy_by_step(record: dict[str, Any]) -> dict[str, list[float | None]] | None:
    """Each GPU's busy fraction in each measured step (steps 2, 3, ...): the mean over the steps hides a step unlike
    the others, e.g. an asynchronous run's last step, which launches no rollout and leaves its engines idle."""
    ends = (record.get("run_summary") or {}).get("step_end_unix") or []
    trace = record.get("gpu_util_trace") or []
    if len(ends) < 2 or not trace:
        return None
    steps = [busy_fractions(trace, start, end) for start, end in zip(ends, ends[1:])]
    return {gpu: [step.get(gpu) for step in steps] for gpu in steps[0]}


def layout_row(record: dict[str, Any], baseline_step_s: float | None) -> dict[str, Any]:
    steps = measured_steps(record)

    def part(key: str) -> float | None:
        return _mean([s[key] for s in steps if s.get(key) is not None])

    step_s = part("time/step")
    peaks = record.get("peak_mib_per_gpu") or {}
    return {
        "layout": record["layout"],
        "gpus": record["gpus"],
        "config": record["config"],
        "exit_code": record["exit_code"],
        "steps_measured": len(steps),
        "step_s": step_s,
        "same_machine_1gpu_step_s": baseline_step_s,
        "speedup": round(baseline_step_s / step_s, 3) if step_s and baseline_step_s else None,
        "first_step_s": first_step_s(record),
        "generate_s": part("time/generate"),
        "teacher_s": part("time/teacher"),
        "train_s": part("time/train"),
        "weight_sync_s": part("time/weight_sync"),
        "sampling_logp_difference": part("sampling/sampling_logp_difference/mean"),
        "peak_gib_per_gpu": {gpu: None if mib is None else round(mib / MIB_PER_GIB, 1) for gpu, mib in peaks.items()},
        "busy_frac_per_gpu": measured_busy(record),
        "busy_frac_per_gpu_by_step": busy_by_step(record),
        **({"async": {key.removeprefix("async/"): part(key) for key in ASYNC_METRICS}}
           if any(key in s for s in steps for key in ASYNC_METRICS) else {}),
        "beside": record.get("beside", []),
    }


def machine_folders(folder: Path) -> list[Path]:
    """The machines' folders (results/gpu_multigpu/MACHINE/, each with its machine.json), in name order."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "machine.json").exists())


def machine_rows(machine: Path, measured_elsewhere: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """One machine's layout rows, each against that machine's one-GPU step (no speed-up where it ran none); a layout
    of its phases that left a trainer log but no record (its machine was lost mid-run) from that log (`partial_row`),
    unless it logged only its warm-up step and some machine measured it in full (`measured_elsewhere`)."""
    records = {json.loads(p.read_text())["layout"]: json.loads(p.read_text())
               for p in sorted(machine.glob("layout_*.json"))}
    if not records:
        return []  # a machine that ran only checks or drills
    # a machine lent for a pair of layouts beside each other (e.g. phase F8) ran no one-GPU step: no speed-up over it
    base = records.get(BASELINE)
    baseline = layout_row(base, None)["step_s"] if base else None
    rows = [{"machine": machine.name, **layout_row(records[name], baseline)} for name in records]
    phases = json.loads((machine / "machine.json").read_text()).get("phases", {})
    jobs = {job: gpus for phase in phases.values() for job, gpus in phase.items()}
    for name, gpus in jobs.items():
        log = logs_of(machine) / f"layout-{name}-trainer.log"
        logged = 0 if name in records or not log.exists() else len(logged_steps(log))
        if not logged:
            continue
        row = partial_row(name, len(gpus.split(",")), log, baseline,
                          first_step_s(base) if base else None,
                          f"its machine was lost after {logged} logged step(s), before it wrote its "
                          "record: figures from its trainer log (busy fractions and peak memory not in this row)")
        if row["steps_measured"] or name not in measured_elsewhere:
            rows.append({"machine": machine.name, **row})
    return rows


def newest(machines: list[Path], name: str) -> tuple[str, Any] | None:
    """(machine, contents) of the last machine that has results file `name`."""
    found = [(m.name, json.loads((m / name).read_text())) for m in machines if (m / name).exists()]
    return found[-1] if found else None


def summary(root: Path) -> dict[str, Any]:
    folder = root / FOLDER
    machines = machine_folders(folder)
    if not machines:
        raise FileNotFoundError(f"{folder}: no MACHINE/machine.json (python -m arc_experiments.gpu multigpu's output)")
    measured = frozenset(json.loads(p.read_text())["layout"] for m in machines for p in m.glob("layout_*.json"))
    result: dict[str, Any] = {
        "machines": {m.name: json.loads((m / "machine.json").read_text()) for m in machines},
        "workload": "configs/qwen3-8b-*.yaml: the random Qwen3-8B shape, LoRA r16, 32 episodes of 6 turns x 768 tokens"
                    " per step, every turn forced to its cap (benchmark_full_turns); step figures: mean of steps 2+;"
                    " each row against the one-GPU step of its own machine (no speed-up where it ran none)",
        "layouts": [row for m in machines for row in machine_rows(m, measured)],
    }
    for key, name in (("drills", "drills.json"), ("engine_check", "engine_check.json")):
        found = newest(machines, name)
        if found is None:
            result[key] = f"not measured: no {FOLDER}/MACHINE/{name}"
            continue
        machine, data = found
        if key == "drills":
            data = [{k: d.get(k) for k in ("failure", "stopped_s", "since", "exit_code", "leftover_processes",
                                           "gpu_used_mib_after", "said")} for d in data["drills"]]
        result[key] = data
        result[f"{key}_machine"] = machine
    arms = {f"{m.name}/{name.removeprefix('server_learning_')}": (m.name, load_record(path))  # a machine's arms
            for m in machines for name, path in record_paths(m, "server_learning_*").items()}  # share its student
    result["server_learning"] = server_learning(arms, folder) if arms else (
        f"not measured: no {FOLDER}/MACHINE/server_learning_ARM.json (python -m arc_experiments.gpu server-learning)")
    asynchronous = {name: arm for name, arm in arms.items() if str(arm[1].get("arm")).startswith("server-async")}
    result["async_learning"] = async_learning(arms) if asynchronous else (
        f"not measured: no {FOLDER}/MACHINE/server_learning_server-async1*.json (python -m arc_experiments.gpu "
        "multigpu --only P,Q,R)")
    drift = folder / "lora_drift.json"
    result["base_drift_after_100_syncs"] = json.loads(drift.read_text()) if drift.exists() else "not measured"
    return result


def server_learning(arms: dict[str, tuple[str, dict[str, Any]]], folder: Path | None = None) -> dict[str, Any]:
    """Each run's (colocated, server, asynchronous server) reward (first / last steps), held-out pass@1 at each
    evaluated step (the per-task mean) and training seconds; `arms`: MACHINE/NAME -> (machine, its
    server_learning_NAME.json), and what the importance-sampling correction saw (`off_policy`, from the run's trainer
    log committed as lab/logs/FOLDER/MACHINE/server-learning-NAME-trainer.log, `logs_of`). Compare runs of one machine
    only: each machine trains its own SFT student."""
    datasets = {record.get("eval_dataset") for _, record in arms.values()}
    if len(datasets) != 1:
        raise ValueError(f"server_learning arms were scored on different datasets: {sorted(map(str, datasets))}")
    dataset = datasets.pop()
    runs = {}
    for name, (machine, record) in sorted(arms.items()):
        summary = record.get("run_summary") or {}
        pass1 = {}
        for step in record["evaluations"]:
            per_task = _per_task(record, step)
            pass1[step] = round(sum(per_task.values()) / len(per_task), 4) if per_task else None
        runs[name] = {"machine": machine, "arm": record.get("arm"), "seed": record.get("seed"),
                      "gpus": record.get("gpus"), "exit_code": record.get("exit_code"),
                      "reward_first_steps": summary.get("reward_first_steps"),
                      "reward_last_steps": summary.get("reward_last_steps"), "heldout_pass1": pass1,
                      "train_s": summary.get("seconds"),  # the run's own clock: start-up and evaluations too
                      "step_time_s": summary.get("step_time_s")}  # the mean step and its parts
        log = f"server-learning-{name.split('/')[-1]}-trainer.log"
        runs[name]["off_policy"] = None if folder is None else off_policy(logs_of(folder / machine) / log)
    return {"eval_dataset": dataset, "runs": runs}


ASYNC_STEP = "20"  # the step both layouts are scored at (the learning arms' 20 steps)


@functools.cache
def _dataset_tasks(dataset: str) -> dict:
    """The evaluation set's tasks by id, loaded once per process (a synthetic spec is regenerated on each load: ~0.6 s,
    and the step summary scores some 60 evaluations of the same set)."""
    from arc_trl.tasks import load_tasks

    return {t.id: t for t in load_tasks(dataset)}


def _per_task(record: dict[str, Any], step: str) -> dict[str, float] | None:
    """Per-task pass@1 of the record's evaluation at `step` (`sweep_choice.attempt_counts`), None where it has none."""
    import tempfile

    from arc_experiments.learning.sweep_choice import attempt_counts

    text = record["evaluations"].get(step)
    if text is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as handle:
        handle.write(text)
        handle.flush()
        counts = attempt_counts(Path(handle.name), record["eval_dataset"], _dataset_tasks(record["eval_dataset"]))
    return {t: c / n for t, (n, c) in counts.items()}


def async_learning(arms: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The learning subject through the server layout, synchronous (`server`) against one step off-policy
    (`server-async1`): `paired_learning` with the keys named sync / async."""
    return paired_learning(arms, ("server", "sync"), ("server-async1", "async"))


def paired_learning(arms: dict[str, tuple[str, dict[str, Any]]], control: tuple[str, str],
                    treatment: tuple[str, str]) -> dict[str, Any]:
    """Two arms of the learning subject (each `(arm, key prefix)`, e.g. `("server", "sync")`), paired by machine and
    seed (a machine's runs share its SFT student): held-out pass@1 at step 20 of each, and the difference
    (treatment - control) with its seed-aware interval (arc_experiments/learning/seed_interval.py); each run's mean
    step (`step_s`) and its whole run (`wall_s`: scripts/train.py's own clock, its start-up and the held-out
    evaluations included; no server start, no SFT); how soon each reaches the control's final score
    (`time_to_final`)."""
    from arc_experiments.learning.seed_interval import seed_interval

    (a, a_key), (b, b_key) = control, treatment
    runs: dict[str, dict[tuple[str, int], dict[str, Any]]] = {a: {}, b: {}}
    for machine, record in arms.values():
        arm = record.get("arm")
        if arm in runs:
            runs[arm][(machine, int(record.get("seed") or 0))] = record
    seeds = sorted(set(runs[a]) & set(runs[b]))
    per_task = {arm: [_per_task(runs[arm][s], ASYNC_STEP) for s in seeds] for arm in runs}
    scored = [i for i, s in enumerate(seeds) if all(per_task[arm][i] for arm in runs)]
    seeds = [seeds[i] for i in scored]
    if not seeds:
        return {"seeds": [], "note": f"no seed scored at step {ASYNC_STEP} in both arms ({a}, {b})"}
    a_runs = [per_task[a][i] for i in scored]
    b_runs = [per_task[b][i] for i in scored]
    diff = seed_interval([b_runs, a_runs], names=[b, a])

    def mean_step(record: dict[str, Any]) -> float | None:
        step = ((record.get("run_summary") or {}).get("step_time_s") or {}).get("step")
        return None if step is None else round(step, 3)

    def mean(per_run: list[dict[str, float]]) -> float:
        return round(sum(sum(r.values()) / len(r) for r in per_run) / len(per_run), 4)

    step_s = {arm: [mean_step(runs[arm][s]) for s in seeds] for arm in runs}
    return {
        "step": int(ASYNC_STEP), "seeds": [seed for _, seed in seeds], "machines": [machine for machine, _ in seeds],
        f"{a_key}_pass1": mean(a_runs), f"{b_key}_pass1": mean(b_runs),
        "diff_ci95": [round(x, 4) for x in diff["ci"]], "diff": round(diff["mean"], 4),
        "seed_part": diff["seed_part"],
        f"{a_key}_step_s": step_s[a], f"{b_key}_step_s": step_s[b],
        **time_to_final({arm: [runs[arm][s] for s in seeds] for arm in runs}, step_s, control, treatment),
        f"{a_key}_wall_s": [(runs[a][s].get("run_summary") or {}).get("seconds") for s in seeds],
        f"{b_key}_wall_s": [(runs[b][s].get("run_summary") or {}).get("seconds") for s in seeds],
    }


def time_to_final(runs: dict[str, list[dict[str, Any]]], step_s: dict[str, list[float | None]],
                  control: tuple[str, str], treatment: tuple[str, str]) -> dict[str, Any]:
    """How soon each arm reaches the control runs' final held-out score: over the pairs scored at every evaluated step
    in both arms (pairs scored at fewer steps left out and counted, so that every step averages the same runs), the
    mean pass@1 at each step, the first step after the first whose mean reaches the control's mean at the last step,
    and its training time (that step x the arm's mean step over those pairs; start-up and evaluations left out).
    None where an arm never reaches it, or where the control ends no higher than it started. Keys named by the arms'
    prefixes, e.g. `steps_to_sync_final: {"sync": 20, "async": 10}`."""
    (a, a_key), (b, b_key) = control, treatment
    steps = sorted({int(step) for records in runs.values() for record in records for step in record["evaluations"]})
    scored = {arm: [{step: _per_task(record, str(step)) for step in steps} for record in runs[arm]] for arm in runs}
    pairs = [i for i in range(len(runs[a])) if all(all(scored[arm][i].values()) for arm in runs)]
    curve = {arm: {str(step): round(sum(sum(scored[arm][i][step].values()) / len(scored[arm][i][step])
                                         for i in pairs) / len(pairs), 4) for step in steps} if pairs else {}
             for arm in runs}
    target = curve[a].get(str(steps[-1])) if pairs else None
    improved = target is not None and target > curve[a][str(steps[0])]
    reach: dict[str, int | None] = {}
    seconds: dict[str, float | None] = {}
    for arm in runs:
        reached = [step for step in steps[1:] if improved and curve[arm][str(step)] >= target]
        reach[arm] = reached[0] if reached else None
        per_step = [step_s[arm][i] for i in pairs if step_s[arm][i] is not None]
        seconds[arm] = (None if reach[arm] is None or not per_step
                        else round(reach[arm] * sum(per_step) / len(per_step), 1))
    return {"pass1_by_step": {a_key: curve[a], b_key: curve[b]}, "pairs": len(pairs),
            "pairs_left_out": len(runs[a]) - len(pairs), f"{a_key}_final_pass1": target,
            f"{a_key}_improved": improved,
            f"steps_to_{a_key}_final": {a_key: reach[a], b_key: reach[b]},
            f"train_s_to_{a_key}_final": {a_key: seconds[a], b_key: seconds[b]}}
