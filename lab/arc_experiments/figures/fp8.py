"""FP8 rollouts (docs/fp8.md) in results/gpu_step_summary.json, from what `python -m arc_experiments.gpu fp8-8b
fp8-profile fp8-learning` brought back, committed under results/gpu_fp8/MACHINE/: the 8B recipe's step at bf16, FP8
weights and FP8 weights + KV cache on one GPU (rollout_NAME.json: settings, exit code, run summary), each against the
bf16 run of the same machine, and `fp8-profile`'s runs (profile_8b-rollout-NAME.json, else their trainer logs); the
learning subject with bf16 vs FP8 rollouts (server_learning_colocate[-fp8][-sSEED].json[.gz]), paired by machine and
seed."""

from __future__ import annotations

import json
import re
import shlex
from functools import partial
from pathlib import Path
from typing import Any

from arc_experiments.figures.multigpu import _mean, logged_steps, measured_steps, paired_learning
from arc_experiments.figures.records import load_record, record_paths
from arc_experiments.machine_logs import checkout_path, logs_of

FOLDER = "results/gpu_fp8"
TARGETS = {"generate_speedup": 1.4, "step_s": 50.0}  # issue 42: generation >= 1.4x faster, the 1-GPU step <= 50 s
COMMAND = ("python -m arc_experiments.gpu fp8-8b fp8-learning --out OUT (configs/qwen3-8b-1gpu-colocate.yaml on the "
           "random-init 8B shape, benchmark_full_turns, 3 steps, seed 0, at bf16, fp8, fp8 + fp8 KV cache back to "
           "back; the learning subject colocated, bf16 vs fp8 rollouts, seeds 0-2)")


def logged(steps: list[dict[str, Any]], key: str) -> list[float]:
    """The values of `key` in the steps that logged it."""
    return [step[key] for step in steps if step.get(key) is not None]


def step_mean(steps: list[dict[str, Any]], key: str) -> float | None:
    """The mean of `key` over the steps that logged it, to 3 decimals (times)."""
    return _mean(logged(steps, key))


def step_mean_sig(steps: list[dict[str, Any]], key: str) -> float | None:
    """The same to 3 significant figures: gaps of ~1e-3, shares of ~1e-4 and ratios of ~1e-23 stay readable."""
    values = logged(steps, key)
    return float(f"{sum(values) / len(values):.3g}") if values else None


def step_min(steps: list[dict[str, Any]], key: str) -> float | None:
    """The smallest value of `key` over the steps that logged it, unrounded (a ~1e-26 ratio stays itself)."""
    values = logged(steps, key)
    return min(values) if values else None


def rollout_row(record: dict[str, Any]) -> dict[str, Any]:
    """One run's step parts (mean of steps 2+), sampler/trainer gap and the share of model tokens TRL's
    importance-sampling correction masked or clipped, and its peak device memory (max over its steps)."""
    steps = measured_steps(record)
    part, sig = partial(step_mean, steps), partial(step_mean_sig, steps)

    peaks = [s["memory/device_peak_gib"] for s in (record.get("run_summary") or {}).get("per_step") or []
             if s.get("memory/device_peak_gib") is not None]
    return {
        "name": record["name"], "rollout_dtype": record["rollout_dtype"], "kv_cache_dtype": record["kv_cache_dtype"],
        "exit_code": record["exit_code"], "steps_measured": len(steps),
        "step_s": part("time/step"), "generate_s": part("time/generate"), "teacher_s": part("time/teacher"),
        "train_s": part("time/train"), "weight_sync_s": part("time/weight_sync"),
        "sampling_logp_difference": sig("sampling/sampling_logp_difference/mean"),
        "sampling_logp_difference_max": sig("sampling/sampling_logp_difference/max"),
        "is_masked_frac": sig("sampling/masked_frac"), "is_clipped_frac": sig("sampling/clipped_frac"),
        # the IS weights themselves: a `*_mask` mode masks only ratios above its cap, so a ratio near 0 (a
        # sequence-level ratio over thousands of tokens) weighs its episode down without counting as masked; a
        # masked ratio is set to 0 before TRL takes the minimum, so read a 0.0 minimum with is_masked_frac
        "is_ratio_mean": sig("sampling/importance_sampling_ratio/mean"),
        "is_ratio_min": step_min(steps, "sampling/importance_sampling_ratio/min"),
        "peak_gib": round(max(peaks), 1) if peaks else None,
        **{key: record[key] for key in ("note", "log") if key in record},
    }


def command_flags(command: str) -> dict[str, str]:
    """A logged command's `--flag value` pairs (each word mapped to the next)."""
    words = shlex.split(command)
    return dict(zip(words, words[1:]))


QUEUE_RUN = re.compile(r"^== (8b-rollout-[\w-]+): (.+)$", re.MULTILINE)  # the queue log's line for each run it started


def lost_records(machine: Path, recorded: set[str]) -> list[dict[str, Any]]:
    """The runs the machine's queue started (queue.log's `== NAME: COMMAND` lines) that left a trainer log
    (NAME.log; both logs in lab/logs/, `logs_of`) with logged steps but no rollout_NAME.json, because the machine was
    taken back mid-run: a record like `write_rollout_record`'s with the settings from the command and the steps from
    the log (no exit code)."""
    queue_log = logs_of(machine) / "queue.log"
    commands = dict(QUEUE_RUN.findall(queue_log.read_text())) if queue_log.exists() else {}
    records = []
    for name, command in commands.items():
        log = logs_of(machine) / f"{name}.log"
        steps = logged_steps(log) if name not in recorded and log.exists() else []
        if not steps:
            continue
        settings = command_flags(command)
        records.append({
            "name": name, "rollout_dtype": settings.get("--vllm_rollout_dtype", "bf16"),
            "kv_cache_dtype": settings.get("--vllm_kv_cache_dtype", "auto"), "exit_code": None,
            "run_summary": {"per_step": [{"step": i, **step} for i, step in enumerate(steps, 1)]},
            "note": f"the queue lost its machine after {len(steps)} logged step(s), before the run wrote its record: "
                    "figures from its trainer log (TRL's logged values, 4 significant digits)",
            "log": checkout_path(log),
        })
    return records


# `fp8-profile`'s runs: a queue log's `== NAME: COMMAND` line and, once the run ended, its `   rc=N in S s` line
PROFILE_RUN = re.compile(r"^== (profile_8b-rollout-[\w-]+): (.+)$(?:\n   rc=(-?\d+) in)?", re.MULTILINE)


def profile_records(machine: Path) -> list[dict[str, Any]]:
    """`fp8-profile`'s runs (any queue*.log's `== profile_8b-rollout-NAME: COMMAND` lines, a name once): the run
    summary of benchmarks/profile_step.py's NAME.json, else the steps of its trainer log (NAME.log in lab/logs/: the
    machine was lost first; a log without a step gives no row), its exit code from the queue log (None: it never
    ended); the step it ran under torch.profiler left out (the profiler slows it)."""
    records = {}
    for queue_log in sorted(logs_of(machine).glob("queue*.log")):
        for name, command, rc in PROFILE_RUN.findall(queue_log.read_text()):
            settings = command_flags(command)
            profiled = int(settings.get("--torch-profile-step", 0))
            profile, log = machine / f"{name}.json", logs_of(machine) / f"{name}.log"
            exit_code = int(rc) if rc else None
            if profile.exists():
                steps = (json.loads(profile.read_text()).get("run_summary") or {}).get("per_step") or []
                source = {"exit_code": exit_code, "note": f"benchmarks/profile_step.py ({name}.json); step "
                          f"{profiled} ran under torch.profiler: left out"}
            elif log.exists() and logged_steps(log):
                steps = [{"step": i, **step} for i, step in enumerate(logged_steps(log), 1)]
                source = {"exit_code": exit_code, "log": checkout_path(log),
                          "note": f"the machine was lost after {len(steps)} logged step(s), before the run wrote its "
                          "profile: figures from its trainer log (TRL's logged values, 4 significant digits)"}
            else:
                continue
            records[name] = {
                "name": name, "rollout_dtype": settings.get("--vllm_rollout_dtype", "bf16"),
                "kv_cache_dtype": settings.get("--vllm_kv_cache_dtype", "auto"), **source,
                "run_summary": {"per_step": [step for step in steps if step.get("step") != profiled]}}
    return list(records.values())


def machine_rows(machine: Path) -> list[dict[str, Any]]:
    """A machine's runs, each with its speed-ups over that machine's bf16 run and the targets; a run the machine lost
    from its trainer log (`lost_records`); `fp8-profile`'s runs (`profile_records`). A machine with no bf16 run (only
    `fp8-profile` ran there) has no speed-ups (`baseline`: null)."""
    records = [json.loads(p.read_text()) for p in sorted(machine.glob("rollout_*.json"))]
    records += lost_records(machine, {record["name"] for record in records})
    rollouts = len(records)
    records += profile_records(machine)
    rows = [rollout_row(record) for record in records]
    base = next((r for r in rows if r["rollout_dtype"] == "bf16" and r["kv_cache_dtype"] == "auto"), None)
    if rollouts and base is None:
        raise FileNotFoundError(f"{machine}: no bf16 rollout_*.json (the same machine's baseline)")
    for row in rows:
        generate = (round(base["generate_s"] / row["generate_s"], 3)
                    if base and base["generate_s"] and row["generate_s"] else None)
        step = round(base["step_s"] / row["step_s"], 3) if base and base["step_s"] and row["step_s"] else None
        row.update({
            "machine": machine.name, "baseline": base["name"] if base else None,
            "generate_speedup_vs_bf16": generate, "step_speedup_vs_bf16": step,
            "generate_target_met": None if generate is None else generate >= TARGETS["generate_speedup"],
            "step_target_met": None if row["step_s"] is None else row["step_s"] <= TARGETS["step_s"],
        })
    return rows


def flag(record: dict[str, Any], name: str, default: str) -> str:
    """The value a layout record's extra training flags gave `name` (the last one wins), else `default`."""
    flags = record.get("extra_flags") or []
    return dict(zip(flags, flags[1:])).get(name, default)


def layout_rows(multigpu: Path) -> list[dict[str, Any]]:
    """The multigpu stage's FP8 layouts (`layout_NAME-fp8.json`, e.g. phase F8's asynchronous 2-GPU server layout),
    each after its bf16 twin (`layout_NAME.json`) of the same machine, with the step's speed-up over the twin. In an
    asynchronous layout `generate_s` is the step's wait for its rollout (`wait_s`), not the generation's length."""
    from arc_experiments.figures.multigpu import machine_folders

    rows = []
    for machine in machine_folders(multigpu) if multigpu.is_dir() else []:
        for path in sorted(machine.glob("layout_*-fp8.json")):
            twin = path.with_name(path.name.removesuffix("-fp8.json") + ".json")
            if not twin.exists():
                raise FileNotFoundError(f"{path}: no {twin.name} (its bf16 twin on the same machine)")
            pair = []
            for record in (json.loads(twin.read_text()), json.loads(path.read_text())):
                row = rollout_row({**record, "name": record["layout"],
                                   "rollout_dtype": flag(record, "--vllm_rollout_dtype", "bf16"),
                                   "kv_cache_dtype": flag(record, "--vllm_kv_cache_dtype", "auto")})
                row["wait_s"] = _mean([s["async/wait_s"] for s in measured_steps(record) if "async/wait_s" in s])
                row.update(machine=machine.name, gpus=record["gpus"], beside=record.get("beside", []))
                pair.append(row)
            base = pair[0]["step_s"]
            for row in pair:
                row["step_speedup_vs_bf16"] = round(base / row["step_s"], 3) if base and row["step_s"] else None
            rows += pair
    return rows


SYNC_CHECKS = {"fp8_sync_check.json": "fp8 weights, hook", "fp8_sync_check_kv.json": "fp8 weights + fp8 kv, hook",
               "fp8_sync_check_server.json": "fp8 weights, the server's push",
               "fp8_sync_no_hook.json": "fp8 weights, TRL's plain sync (expected to fail)"}


def sync_checks(machines: list[Path]) -> dict[str, Any]:
    """benchmarks/fp8_sync_check.py's verdicts (`python -m arc_experiments.gpu fp8-sync`) per machine: whether the
    synced FP8 engine gave the fresh FP8 engine's greedy tokens and log-probs, whether the weights moved (the premise),
    the plain sync's error, the FP8 - bf16 log-prob gap of fresh engines."""
    found = {}
    for machine in machines:
        for name, what in SYNC_CHECKS.items():
            if (machine / name).exists():
                check = json.loads((machine / name).read_text())
                found[f"{machine.name}/{name}"] = {
                    "what": what, "passed": check["passed"], "premise_weights_moved": check["premise_weights_moved"],
                    "synced_vs_fresh_fp8_max_abs_logp": check.get("synced_vs_fresh_fp8_max_abs_logp"),
                    "synced_vs_fresh_fp8_untaught_max_abs_logp": check.get("synced_vs_fresh_fp8_untaught_max_abs_logp"),
                    "layer_problems": len(check["layer_problems"]) if "layer_problems" in check else None,
                    "fresh_fp8_vs_bf16_max_abs_logp": check.get("fresh_fp8_vs_bf16_max_abs_logp"),
                    "fresh_fp8_vs_bf16_untaught_max_abs_logp": check.get("fresh_fp8_vs_bf16_untaught_max_abs_logp"),
                    "discriminates": check.get("discriminates"),  # the check could fail (a bf16 engine fails it)
                    "sync_error": check.get("sync_error"), "device": check["device"], "vllm": check["vllm"]}
    return found


LEARNING_ARMS = {"colocate": "bf16", "colocate-fp8": "fp8", "colocate-fp8-tis": "fp8_tis"}  # arm -> its label


def learning_sampling(arms: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """What the sampler/trainer gap did in each learning run (the evidence the random 8B shape cannot give), per
    rollout dtype, one entry per run in machine and seed order: the mean over its steps of the mean |log-prob
    difference| per token and of the shares of model tokens the IS correction masked or clipped, and the smallest
    IS ratio of any step (None where the run did not log it)."""
    found: dict[str, list[dict[str, Any]]] = {dtype: [] for dtype in LEARNING_ARMS.values()}
    for machine, record in sorted(arms.values(), key=lambda a: (a[0], int(a[1].get("seed") or 0))):
        if record.get("arm") not in LEARNING_ARMS:
            continue
        steps = (record.get("run_summary") or {}).get("per_step") or []
        mean = partial(step_mean_sig, steps)
        found[LEARNING_ARMS[record["arm"]]].append({
            "machine": machine, "seed": int(record.get("seed") or 0), "steps": len(steps),
            "sampling_logp_difference": mean("sampling/sampling_logp_difference/mean"),
            "is_masked_frac": mean("sampling/masked_frac"), "is_clipped_frac": mean("sampling/clipped_frac"),
            "is_ratio_min": step_min(steps, "sampling/importance_sampling_ratio/min")})
    return found


def tis_learning(arms: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any] | str:
    """The FP8 arm with token-level truncated IS (`fp8-learning-tis`) against the same machines' bf16 runs."""
    if not any(record.get("arm") == "colocate-fp8-tis" for _, record in arms.values()):
        return ("not measured: no server_learning_colocate-fp8-tis*.json (python -m arc_experiments.gpu "
                "fp8-learning-tis)")
    return paired_learning(arms, ("colocate", "bf16"), ("colocate-fp8-tis", "fp8_tis"))


def summary(root: Path) -> dict[str, Any]:
    """`fp8_sync` (the GPU sync checks), `fp8_rollouts` (rows, targets, command), `fp8_layouts` (the multigpu
    stage's FP8 layouts beside their bf16 twins) and `fp8_learning`; "not measured" where nothing is committed."""
    folder = root / FOLDER
    machines = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    rows = [row for machine in machines for row in machine_rows(machine)]
    layouts = layout_rows(root / "results" / "gpu_multigpu")
    arms = {f"{m.name}/{name}": (m.name, load_record(path))
            for m in machines for name, path in record_paths(m, "server_learning_colocate*").items()}
    checks = sync_checks(machines)
    return {
        "fp8_sync": checks or (
            f"not measured: no {FOLDER}/MACHINE/fp8_sync_*.json (python -m arc_experiments.gpu fp8-sync)"),
        "fp8_rollouts": {"rows": rows, "targets": TARGETS, "command": COMMAND} if rows else (
            f"not measured: no {FOLDER}/MACHINE/rollout_*.json (python -m arc_experiments.gpu fp8-8b)"),
        "fp8_layouts": {"rows": layouts, "command": "python -m arc_experiments.gpu multigpu --only F8 --out OUT"}
        if layouts else ("not measured: no results/gpu_multigpu/MACHINE/layout_*-fp8.json (python -m "
                         "arc_experiments.gpu multigpu --only F8)"),
        "fp8_learning": paired_learning(arms, ("colocate", "bf16"), ("colocate-fp8", "fp8"))
        | {"sampling": learning_sampling(arms), "token_truncate_is": tis_learning(arms)} if arms else (
            f"not measured: no {FOLDER}/MACHINE/server_learning_colocate*.json (python -m arc_experiments.gpu "
            "fp8-learning)"),
    }
