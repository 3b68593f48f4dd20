"""What a finished stage measured, read back from its files: held-out metrics with per-task pass@1, training logs,
the machine and its load."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from arc_trl.models.model_identity import model_fingerprint

from arc_experiments.learning.profile import WINDOW, Stage, opd_teacher_of, read_yaml, teachers_of


@lru_cache(maxsize=8)
def _tasks_by_id(dataset: str) -> dict[str, Any]:
    from arc_trl.tasks import load_tasks

    return {t.id: t for t in load_tasks(dataset)}


def heldout_metrics(folder: Path, reward_mode: str, agent_mode: str,
                    n_predictions: int | None = None) -> dict[str, Any]:
    """Solve rate, pass@k, valid submissions, pixel score (evaluate.py's metrics.json), the mean training reward of
    the attempts (recomputed from each attempt's outcome in completions.jsonl) and each task's pass@1 (`per_task`,
    from per_attempt.jsonl: the input of the intervals)."""
    from arc_experiments.learning.per_task import per_task_pass1
    from arc_trl.rewards.modes import compute_reward

    metrics = json.loads((folder / "metrics.json").read_text())
    records = [json.loads(line) for line in (folder / "completions.jsonl").read_text().splitlines() if line.strip()]
    tasks = _tasks_by_id(metrics["dataset"])
    rewards = [compute_reward(reward_mode, r["outcome"], tasks[r["task_id"]], agent_mode) for r in records]
    return {
        "n_tasks": metrics["n_tasks"],
        "n_attempts": metrics["n_attempts"],
        "solve_rate": metrics["pass_rate"],
        "pass_at_k": metrics["is_correct"],
        "valid_outputs": metrics["valid_outputs"],
        "pixel_score": metrics["pixel_score"],
        "mean_reward": sum(rewards) / len(rewards),
        "submit_rate": sum(bool(r["outcome"].get("submitted")) for r in records) / len(records),  # SUBMIT(...) called
        "turns": sum(r["outcome"].get("num_turns", 0) for r in records) / len(records),
        "per_task": per_task_pass1(folder, n_predictions),
    }


def collect_results(out: Path, stages: list[Stage], configs: Path, profile: dict[str, Any],
                    n_predictions: int | None = None) -> dict[str, Any]:
    """Everything measured so far in `out` (the stages of the plan whose done file exists): held-out evaluations,
    RL training logs, teachers and their teacher_kl, and how the RL runs map to arms, seeds and checkpoints."""
    config = read_yaml(configs / "grpo-opd.yaml")
    heldout, training, runs, teachers = {}, {}, {}, {}
    for stage in stages:
        info = stage.info
        if stage.kind == "rl":
            runs[info["run"]] = {"arm": info["arm"], "seed": info["seed"], "steps": info["steps"], "checkpoints": {},
                                 "final": None}
        if not stage.done_file.exists():
            continue
        if stage.kind == "eval":
            metrics = heldout_metrics(out / "eval" / info["eval"], config["reward_mode"], config["agent_mode"],
                                      n_predictions)
            model = stage.command[stage.command.index("--model") + 1]  # scored on this machine, just now
            heldout[info["eval"]] = {**metrics, "privileged": info["privileged"], "model": model_fingerprint(model)}
            if "run" in info:
                run = runs[info["run"]]
                if info["step"] == run["steps"]:
                    run["final"] = info["eval"]
                else:
                    run["checkpoints"][str(info["step"])] = info["eval"]
        elif stage.kind == "rl":
            training[info["run"]] = training_metrics(out / info["run"])
            config_file = out / info["run"] / "arc_trl_config.json"  # written by the run: travels with its folder
            start = json.loads(config_file.read_text()).get("start_model_fingerprint") if config_file.exists() else None
            runs[info["run"]]["student_model"] = start
    for teacher in teachers_of(configs, profile).values():
        entry = {"config": str(teacher.config), "base": teacher.base, "privileged": teacher.privileged,
                 "eval": teacher.name, "teacher_kl": None, "teacher_kl_source": None}
        probe = out / f"kl-{teacher.name}"
        if (probe / "run_summary.json").exists():
            kl = training_metrics(probe)["teacher_kl"]
            entry.update(teacher_kl=sum(kl) / len(kl) if kl else None,
                         teacher_kl_source=f"{len(kl)}-step probe at learning rate 0")
        else:  # the first step of the OPD runs that used it: scored on the student's own episodes, before any update
            opd = opd_teacher_of(teachers_of(configs, profile), profile)
            firsts = [t["teacher_kl"][0] for name, t in training.items()
                      if runs.get(name, {}).get("arm") == "grpo-opd" and t.get("teacher_kl")]
            if opd is not None and opd.name == teacher.name and firsts:
                entry.update(teacher_kl=sum(firsts) / len(firsts),
                             teacher_kl_source=f"step 1 of {len(firsts)} GRPO + OPD run(s)")
        teachers[teacher.name] = entry
    check_file = out / "heldout_check.json"
    opd = opd_teacher_of(teachers_of(configs, profile), profile)
    return {
        "heldout": heldout, "training": training, "runs": runs, "teachers": teachers,
        "opd_teacher": opd.name if opd else None,
        "heldout_check": json.loads(check_file.read_text()) if check_file.exists() else None,
    }


def training_metrics(run_dir: Path) -> dict[str, Any]:
    state = json.loads((run_dir / "trainer_state.json").read_text())
    logs = [h for h in state["log_history"] if "reward" in h]

    def series(key: str) -> list[float]:
        return [h[key] for h in logs if key in h]

    def window(values: list[float], last: bool) -> float | None:
        part = values[-WINDOW:] if last else values[:WINDOW]
        return sum(part) / len(part) if part else None

    out: dict[str, Any] = {"steps": [h["step"] for h in logs], "seconds": json.loads(
        (run_dir / "run_summary.json").read_text())["seconds"]}
    numeric = sorted({k for h in logs for k, v in h.items() if isinstance(v, (int, float)) and k != "step"})
    out["means"] = {k: sum(series(k)) / len(series(k)) for k in numeric}
    for key, name in (("reward", "reward"), ("teacher_kl", "teacher_kl"), ("rewards/valid_outputs/mean", "valid"),
                      ("rewards/exact_match_fraction/mean", "exact")):
        values = series(key)
        out[name] = values
        out[f"{name}_first"], out[f"{name}_last"] = window(values, False), window(values, True)
    return out



class LoadSampler:
    """Samples the 1-minute load average every few seconds (how much other processes competed for the CPUs)."""

    def __init__(self, every_s: float = 10.0) -> None:
        self.values: list[float] = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.values.append(os.getloadavg()[0])

    def stop(self) -> list[float]:
        self._stop.set()
        return self.values


def machine() -> str:
    gpu = gpu_name()
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPU cores ({cpu}), " + (f"1 GPU ({gpu})" if gpu else "no GPU")


def gpu_name() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else None


