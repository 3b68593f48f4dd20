"""The learning experiment in one command: SFT a student, build teachers, RL it (GRPO + OPD, GRPO alone), evaluate.

    python scripts/demo_learning.py              # the CPU demo: ~10 min on 2 CPU cores (~14 with --ablation)
    python scripts/demo_learning.py --resume     # continue an interrupted run (finished stages are kept)
    python scripts/demo_learning.py --ablation   # also GRPO without the teacher, from the same student
    python scripts/demo_learning.py --configs configs/gpu/learning --out /tmp/arc-gpu/learning   # the GPU experiment
    python scripts/demo_learning.py --configs configs/gpu/learning --list      # its stages, needs and what is done

Every stage runs the project's own entry point (output in OUT/logs/<stage>.log):

  check-heldout  python -m arc_experiments.learning.heldout_check   no held-out task in the SFT, RL or validation sets
  model          scripts/build_tiny_model.py                  random-init Qwen3 + local tokenizer
  student        scripts/sft.py --config CONFIGS/sft-student.yaml   SFT warm start (reference episodes)
  TEACHER        scripts/sft.py --config CONFIGS/<its config>  each teacher of the profile (longer SFT, or SFT on
                                                              privileged prompts)
  eval-NAME      scripts/evaluate.py generate                 held-out tasks: the student, each teacher (a privileged
                                                              teacher with its privileged prompt), each RL run
  kl-TEACHER     scripts/train.py, learning rate 0            teacher_kl of each teacher on the student's episodes
  RUN            scripts/train.py --config CONFIGS/grpo-opd.yaml   per seed: grpo-opd (the OPD teacher) and grpo-only
  eval-RUN-stepN scripts/evaluate.py generate                 its checkpoints every `eval_every` steps, then the end

Then OUT/results.json (every evaluation with its per-task pass@1, the training logs, each stage's wall time; written
after every stage, so a run stopped between stages leaves it) and, once a run is complete, the plots
(docs/img/<prefix>_*.png), the generated block of docs/learning.md and (GPU profile) the summary JSON with the
bootstrap CIs (arc_experiments/learning/report.py).

The folder given by `--configs` holds the stage configs (sft-student.yaml, the teachers' SFT configs, grpo-opd.yaml)
and a `profile.yaml` (`DEFAULT_PROFILE` below: model shape, evaluation backend, held-out and validation sets, seeds,
arms, teachers, checkpoint evaluations, docs section): configs/demo is the CPU demo, configs/gpu/learning the GPU
experiment. `--until STAGE` stops after a stage and `--only A,B*` runs only some (shell patterns; `--with-needs` adds
what they need and is not done), to split a run over several device calls or machines, then `--resume`;
`--report results.json [more.json ...]` rewrites the docs block, plots and summary from finished runs' results (the
results of several machines are merged).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout: stages run its scripts/ with its configs/

CONFIGS = Path("configs/demo")
GRPO_CONFIG = CONFIGS / "grpo-opd.yaml"
DOCS = Path("docs/learning.md")
IMAGES = Path("docs/img")
BEGIN, END = "<!-- demo-results:begin -->", "<!-- demo-results:end -->"
WINDOW = 10  # training steps averaged at the start and at the end of RL
ARMS = ("grpo-opd", "grpo-only")
# profile.yaml keys and their values for the CPU demo (configs/demo/profile.yaml may override them)
DEFAULT_PROFILE: dict[str, Any] = {
    "model_args": [],
    "eval_args": ["--backend", "transformers", "--batch-size", "128", "--workers", "2"],
    "heldout_tasks": 96,
    "heldout_seed": 1,  # the held-out tasks: the RL dataset's families and difficulty with this seed
    "n_predictions": 4,
    "validation_tasks": 0,  # tasks of the validation set (the sweep chooses the recipe on them); 0: none
    "validation_seed": 4,
    "seeds": None,  # RL seeds, e.g. [0, 1] (run names get -s<seed>); None: --seed alone, runs named like the arm
    "arms": ["grpo-opd"],  # RL arms: grpo-opd and/or grpo-only (--ablation adds grpo-only)
    "teachers": {"teacher": "sft-teacher.yaml"},  # name: SFT config, or {config: ..., base: student|model|TEACHER}
    "opd_teacher": None,  # the teacher of the grpo-opd arm (default: the first one)
    "eval_every": 0,  # also evaluate each RL run's checkpoint every this many steps (0: only the end)
    "kl_probe_steps": 0,  # > 0: measure each teacher's teacher_kl to the student (train.py at learning rate 0)
    "heldout_check": False,  # check-heldout stage: no held-out task in the SFT, RL or validation sets
    "summary_file": None,  # e.g. docs/gpu_learning_summary.json (arc_experiments/learning/report.py)
    "docs_section": "demo",
    "image_prefix": "learning",
}


@dataclass
class Stage:
    name: str
    command: list[str]
    done_file: Path  # exists once the stage has finished
    needs: tuple[str, ...] = ()  # stages whose outputs it reads
    kind: str = ""  # check | model | sft | eval | rl | kl
    info: dict[str, Any] = field(default_factory=dict)  # what results.json needs to read its outputs


@dataclass
class Teacher:
    name: str
    config: Path  # its SFT config
    base: str  # the model it is trained from: "student", "model" or an earlier teacher
    privileged: str  # the prompt it is trained and evaluated with: none | program | solutions


@dataclass
class Run:
    name: str
    arm: str  # grpo-opd | grpo-only
    seed: int


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text())


def load_profile(configs: Path) -> dict[str, Any]:
    """The run's profile: DEFAULT_PROFILE updated with `configs/profile.yaml` (unknown keys are an error)."""
    path = configs / "profile.yaml"
    profile = dict(DEFAULT_PROFILE)
    if path.exists():
        given = read_yaml(path) or {}
        unknown = sorted(set(given) - set(DEFAULT_PROFILE))
        if unknown:
            raise SystemExit(f"[demo] {path}: unknown key(s) {unknown}; known: {sorted(DEFAULT_PROFILE)}")
        profile.update(given)
    return profile


def heldout_spec(n_tasks: int, seed: int = 1, configs: Path = CONFIGS) -> str:
    """The held-out curriculum: the RL dataset's families and difficulty with another seed (SFT 0, RL 2, eval 1).
    The validation set is built the same way with its own seed (`validation_seed`)."""
    from arc_trl.synthetic.spec import parse_synthetic_spec

    spec = parse_synthetic_spec(read_yaml(configs / "grpo-opd.yaml")["dataset"])
    families = "+".join(spec["families"] or [])
    spec_text = f"synthetic:n={n_tasks},seed={seed},difficulty={spec['difficulty']}"
    return spec_text + (f",families={families}" if families else "")


def teachers_of(configs: Path, profile: dict[str, Any]) -> dict[str, Teacher]:
    """The profile's teachers, in order; a teacher's privileged prompt comes from its SFT config (`privileged`)."""
    reserved = {"model", "student", "check-heldout", *ARMS}
    teachers: dict[str, Teacher] = {}
    for name, spec in (profile["teachers"] or {}).items():
        spec = {"config": spec} if isinstance(spec, str) else dict(spec)
        unknown = sorted(set(spec) - {"config", "base"})
        if unknown or "config" not in spec:
            raise SystemExit(f"[demo] teacher {name}: expected a config file or {{config, base}}, got {spec}")
        base = spec.get("base", "student")
        if name in reserved or name.startswith(("eval-", "kl-", "grpo-")):
            raise SystemExit(f"[demo] teacher name {name!r} is taken by another stage")
        if base not in {"model", "student", *teachers}:
            raise SystemExit(f"[demo] teacher {name}: base {base!r} must be model, student or an earlier teacher")
        config = configs / spec["config"]
        privileged = str((read_yaml(config) or {}).get("privileged", "none"))
        teachers[name] = Teacher(name, config, base, privileged)
    opd = profile["opd_teacher"]
    if opd is not None and opd not in teachers:
        raise SystemExit(f"[demo] opd_teacher {opd!r} is not one of the teachers {sorted(teachers)}")
    return teachers


def opd_teacher_of(teachers: dict[str, Teacher], profile: dict[str, Any]) -> Teacher | None:
    name = profile["opd_teacher"] or next(iter(teachers), None)
    return teachers.get(name) if name else None


def runs_of(profile: dict[str, Any], seed: int, ablation: bool) -> list[Run]:
    """The RL runs: each seed x each arm (seed-major, so that a seed's runs sit together)."""
    arms = list(profile["arms"]) + (["grpo-only"] if ablation and "grpo-only" not in profile["arms"] else [])
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise SystemExit(f"[demo] arms {unknown}: known arms are {list(ARMS)}")
    arms = [a for a in ARMS if a in arms]
    if profile["seeds"] is None:
        return [Run(arm, arm, seed) for arm in arms]
    return [Run(f"{arm}-s{s}", arm, int(s)) for s in profile["seeds"] for arm in arms]


def checkpoint_steps(configs: Path, profile: dict[str, Any]) -> list[int]:
    """The steps whose checkpoints are evaluated (before the last step, which is the run's own evaluation)."""
    every = int(profile["eval_every"] or 0)
    max_steps = int(read_yaml(configs / "grpo-opd.yaml")["max_steps"])
    return list(range(every, max_steps, every)) if every > 0 else []


def plan(out: Path, seed: int, n_heldout: int, n_predictions: int, ablation: bool, configs: Path = CONFIGS,
         profile: dict[str, Any] | None = None) -> list[Stage]:
    py = sys.executable
    profile = {**DEFAULT_PROFILE, **(profile or {})}
    grpo_config = configs / "grpo-opd.yaml"
    grpo = read_yaml(grpo_config)
    model, student = out / "model", out / "student"
    heldout = heldout_spec(n_heldout, profile["heldout_seed"], configs)
    teachers = teachers_of(configs, profile)
    opd_teacher = opd_teacher_of(teachers, profile)
    runs = runs_of(profile, seed, ablation)
    if any(r.arm == "grpo-opd" for r in runs) and opd_teacher is None:
        raise SystemExit("[demo] the grpo-opd arm needs a teacher: the profile lists none")
    steps = checkpoint_steps(configs, profile)

    def evaluate(name: str, model_dir: Path, needs: str, privileged: str = "none", **info: Any) -> Stage:
        folder = out / "eval" / name
        hint = ["--privileged", privileged] if privileged != "none" else []
        return Stage(f"eval-{name}", [
            py, "scripts/evaluate.py", "generate", "--train-config", str(grpo_config), "--model", str(model_dir),
            "--dataset", heldout, "--output-dir", str(folder), "--n-predictions", str(n_predictions),
            "--seed", str(seed), "--no-progress", *hint, *map(str, profile["eval_args"]),
        ], folder / "metrics.json", needs=(needs,), kind="eval", info={"eval": name, "privileged": privileged, **info})

    def rl(run: Run) -> Stage:
        save = ["--save_strategy", "steps", "--save_steps", str(profile["eval_every"]), "--save_only_model", "true"] \
            if steps else []
        if run.arm == "grpo-opd":
            arm = ["--teacher_model", str(out / opd_teacher.name)]
            arm += ["--teacher_privileged", opd_teacher.privileged] if opd_teacher.privileged != "none" else []
            needs: tuple[str, ...] = ("student", opd_teacher.name)
        else:  # the same run without the teacher term
            arm, needs = ["--teacher_backend", "none", "--teacher_tau", "0"], ("student",)
        return Stage(run.name, [
            py, "scripts/train.py", "--config", str(grpo_config), "--model_name_or_path", str(student),
            "--output_dir", str(out / run.name), "--seed", str(run.seed), *save, *arm,
        ], out / run.name / "run_summary.json", needs=needs, kind="rl",
            info={"run": run.name, "arm": run.arm, "seed": run.seed, "steps": int(grpo["max_steps"])})

    def kl_probe(teacher: Teacher) -> Stage:
        """The teacher scores the student's own episodes; learning rate 0 keeps the student as it is."""
        name = f"kl-{teacher.name}"
        hint = ["--teacher_privileged", teacher.privileged] if teacher.privileged != "none" else []
        return Stage(name, [
            py, "scripts/train.py", "--config", str(grpo_config), "--model_name_or_path", str(student),
            "--teacher_backend", "local", "--teacher_model", str(out / teacher.name), *hint, "--teacher_tau", "0",
            "--learning_rate", "0", "--max_steps", str(profile["kl_probe_steps"]), "--save_strategy", "no",
            "--collapse_guard", "off", "--output_dir", str(out / name), "--seed", str(seed),
        ], out / name / "run_summary.json", needs=("student", teacher.name), kind="kl", info={"teacher": teacher.name})

    def sft(name: str, config: Path, base: Path, target: Path, needs: str) -> Stage:
        return Stage(name, [py, "scripts/sft.py", "--config", str(config), "--model_name_or_path", str(base),
                            "--output_dir", str(target), "--seed", str(seed)], target / "model.safetensors",
                     needs=(needs,), kind="sft")

    stages = []
    if profile["heldout_check"]:
        against = [f"sft-student={read_yaml(configs / 'sft-student.yaml')['dataset']}"]
        against += [f"sft-{t.name}={read_yaml(t.config)['dataset']}" for t in teachers.values()]
        against += [f"rl={grpo['dataset']}"]
        if profile["validation_tasks"]:
            against += [f"validation={heldout_spec(profile['validation_tasks'], profile['validation_seed'], configs)}"]
        stages.append(Stage("check-heldout", [py, "-m", "arc_experiments.learning.heldout_check", "--heldout", heldout,
                                              "--against", *against, "--out", str(out / "heldout_check.json")],
                            out / "heldout_check.json", kind="check"))
    stages += [
        Stage("model", [py, "scripts/build_tiny_model.py", "--out", str(model), "--seed", str(seed),
                        *map(str, profile["model_args"])], model / "model.safetensors", kind="model"),
        sft("student", configs / "sft-student.yaml", model, student, needs="model"),
    ]
    stages += [sft(t.name, t.config, out / t.base, out / t.name, needs=t.base) for t in teachers.values()]
    stages.append(evaluate("student", student, needs="student"))
    stages += [evaluate(t.name, out / t.name, needs=t.name, privileged=t.privileged, teacher=t.name)
               for t in teachers.values()]
    if profile["kl_probe_steps"]:
        stages += [kl_probe(t) for t in teachers.values()]
    for run in runs:
        stages.append(rl(run))
        stages += [evaluate(f"{run.name}-step{step}", out / run.name / f"checkpoint-{step}", needs=run.name,
                            run=run.name, step=step) for step in steps]
        stages.append(evaluate(run.name, out / run.name, needs=run.name, run=run.name, step=int(grpo["max_steps"])))
    return stages


def run_stage(stage: Stage, logs: Path) -> float:
    """Run one stage, its output in logs/NAME.log; its seconds. A failure (exit code or no done file) is a
    SystemExit that quotes the end of the log."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{stage.name}.log"
    print(f"[demo] {stage.name}: {' '.join(stage.command[1:])}", flush=True)
    started = time.time()
    with open(log, "w") as f:
        code = subprocess.run(stage.command, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
    seconds = time.time() - started
    if code != 0 or not stage.done_file.exists():
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-25:])
        raise SystemExit(f"[demo] stage {stage.name} failed (exit code {code}); last lines of {log}:\n{tail}")
    print(f"[demo] {stage.name} done in {seconds:.0f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
    return seconds


def run_stages(stages: list[Stage], logs: Path, seconds: dict[str, float] | None = None,
               after_each: Callable[[], Any] | None = None) -> dict[str, float]:
    """Run, in list order, the stages whose done file is missing; seconds of each stage run (also added to `seconds`
    as they finish), then `after_each()`. A failed stage ends the run (SystemExit); the finished ones are kept for
    --resume."""
    seconds = {} if seconds is None else seconds
    for stage in stages:
        if stage.done_file.exists():
            print(f"[demo] {stage.name}: already done ({stage.done_file})")
        else:
            seconds[stage.name] = round(run_stage(stage, logs), 1)
            if after_each is not None:
                after_each()
    return seconds


# ------------------------------------------------------------------------------------------------------ measuring
@lru_cache(maxsize=8)
def _tasks_by_id(dataset: str) -> dict[str, Any]:
    from arc_trl.tasks import load_tasks

    return {t.id: t for t in load_tasks(dataset)}


def heldout_metrics(folder: Path, reward_mode: str, agent_mode: str,
                    n_predictions: int | None = None) -> dict[str, Any]:
    """Solve rate, pass@k, valid submissions, pixel score (evaluate.py's metrics.json), the mean training reward of
    the attempts (recomputed from each attempt's outcome in completions.jsonl) and each task's pass@1 (`per_task`,
    from per_attempt.jsonl: the input of the bootstrap CIs)."""
    from arc_trl.eval.per_task import per_task_pass1
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
            heldout[info["eval"]] = {**metrics, "privileged": info["privileged"]}
            if "run" in info:
                run = runs[info["run"]]
                if info["step"] == run["steps"]:
                    run["final"] = info["eval"]
                else:
                    run["checkpoints"][str(info["step"])] = info["eval"]
        elif stage.kind == "rl":
            training[info["run"]] = training_metrics(out / info["run"])
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


def moving_average(values: list[float], width: int = WINDOW) -> list[float]:
    """Trailing mean over up to `width` values (fewer at the start)."""
    windows = (values[max(0, i - width + 1) : i + 1] for i in range(len(values)))
    return [sum(w) / len(w) for w in windows]


def plot_series(runs: dict[str, dict[str, Any]], key: str, ylabel: str, title: str, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray")
    for (name, run), color in zip(runs.items(), colors):
        values = run.get(key) or []
        if not values:
            continue
        steps = run["steps"][: len(values)]
        ax.plot(steps, values, color=color, alpha=0.35, linewidth=1, marker=".", label=f"{name} (per step)")
        ax.plot(steps, moving_average(values), color=color, linewidth=2, label=f"{name} ({WINDOW}-step mean)")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", bbox_inches="tight")


# ------------------------------------------------------------------------------------------------------ reporting
def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _columns(results: dict[str, Any]) -> list[tuple[str, str]]:
    """The held-out table's columns (evaluation name, title): the student, each RL run's end, each teacher."""
    ev, runs = results["heldout"], results.get("runs")
    arm_titles = {"grpo-opd": "after GRPO + OPD", "grpo-only": "after GRPO only (ablation)"}
    if runs is None:  # results written before runs were recorded
        columns = [("student", "student (SFT warm start, before RL)"), ("grpo-opd", arm_titles["grpo-opd"]),
                   ("grpo-only", arm_titles["grpo-only"]), ("teacher", "teacher (longer SFT)")]
        return [(k, title) for k, title in columns if k in ev]
    columns = [("student", "student (SFT warm start, before RL)")]
    by_arm = sorted(runs.items(), key=lambda item: (ARMS.index(item[1]["arm"]), item[1]["seed"]))
    for name, run in by_arm:
        suffix = f", seed {run['seed']}" if name != run["arm"] else ""
        if run.get("final") in ev:
            columns.append((run["final"], arm_titles[run["arm"]] + suffix))
    for name, teacher in (results.get("teachers") or {}).items():
        if name not in ev:
            continue
        if teacher["privileged"] != "none":
            title = f"{name} (privileged prompt: {teacher['privileged']})"
        else:
            title = "teacher (longer SFT)" if name == "teacher" else f"{name} (teacher)"
        columns.append((name, title))
    return [(k, title) for k, title in columns if k in ev]


def results_block(results: dict[str, Any], image_prefix: str = "learning", stats: str | None = None) -> str:
    """The generated docs block: held-out table, RL training table, teacher_kl, stage times, `stats` (the CI tables of
    arc_experiments/learning/report.py) and the plots."""
    ev, runs = results["heldout"], results["training"]
    columns = _columns(results)
    first = ev[columns[0][0]]
    lines = [
        f"Held-out tasks: `{results['heldout_dataset']}`, {first['n_attempts'] // first['n_tasks']} attempts per task "
        f"at temperature {results['temperature']} ({first['n_attempts']} attempts per model).",
        "",
        "| held-out metric | " + " | ".join(title for _, title in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    rows = [("solve rate (pass@1)", "solve_rate", pct), (f"pass@{first['n_attempts'] // first['n_tasks']}",
            "pass_at_k", pct), ("valid submissions", "valid_outputs", pct), ("pixel score", "pixel_score", pct),
            (f"mean reward ({results['reward_mode']})", "mean_reward", num),
            ("episodes ending in SUBMIT", "submit_rate", pct), ("turns per episode", "turns", lambda x: num(x, 2))]
    for label, key, fmt in rows:
        if any(ev[k].get(key) is not None for k, _ in columns):  # results written before a metric existed lack it
            lines.append(f"| {label} | " + " | ".join(fmt(ev[k].get(key)) for k, _ in columns) + " |")
    if runs:
        lines += ["", f"| RL training (first / last {WINDOW} steps) | " + " | ".join(runs) + " |",
                  "|---|" + "---|" * len(runs)]
        for label, key, fmt in (("mean reward", "reward", num), ("valid submissions", "valid", pct),
                                ("exact test grids", "exact", pct), ("teacher_kl", "teacher_kl", num)):
            cells = []
            for run in runs.values():
                a, b = run.get(f"{key}_first"), run.get(f"{key}_last")
                cells.append("-" if a is None else f"{fmt(a)} -> {fmt(b)}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    kl_runs = {name: run["teacher_kl"] for name, run in runs.items() if run.get("teacher_kl")}
    if list(kl_runs) == ["grpo-opd"]:
        kl = kl_runs["grpo-opd"]
        lines.append(f"\nteacher_kl at the first step {kl[0]:.3f}, at the last step {kl[-1]:.3f}.")
    elif kl_runs:
        lines.append("\nteacher_kl at the first / last step: " + ", ".join(
            f"{name} {kl[0]:.3f} / {kl[-1]:.3f}" for name, kl in kl_runs.items()) + ".")
    if stats:
        lines += ["", stats]
    times = ", ".join(f"{name} {s:.0f} s" for name, s in results["stage_seconds"].items())
    parts = results.get("parts", 1)
    where = results["machine"] if parts == 1 else f"{parts} machines ({' + '.join(results['devices'])})"
    repeated = results.get("repeated_stages") or []
    again = f"; also rebuilt on other machines, in the total: {', '.join(repeated)}" if repeated else ""
    lines += [
        "",
        f"Run: seed {results['seed']}, {where}, total wall time {results['total_seconds'] / 60:.1f} min "
        f"({times}{again}); 1-minute load average during the run {results['load_mean']:.1f} on average, "
        f"{results['load_max']:.1f} at most ({results['cpus']} CPUs: a load above that means other processes "
        "were competing for them). Written by "
        f"`python scripts/demo_learning.py` on {results['date']}.",
        "",
    ]
    if stats and (results.get("runs") or {}):
        lines.append(f"![held-out pass@1 over GRPO steps](img/{image_prefix}_heldout_pass1.png)")
    lines += [
        f"![reward over GRPO steps](img/{image_prefix}_reward.png)",
        f"![teacher_kl over GRPO steps](img/{image_prefix}_teacher_kl.png)",
    ]
    return "\n".join(lines)


def write_docs(block: str, section: str = "demo") -> None:
    """Replace the generated block of `section` in docs/learning.md (markers `<!-- SECTION-results:begin/end -->`)."""
    begin, end = (BEGIN, END) if section == "demo" else (f"<!-- {section}-results:begin -->",
                                                          f"<!-- {section}-results:end -->")
    text = DOCS.read_text() if DOCS.exists() else f"# Learning demo\n\n{begin}\n{end}\n"
    if begin not in text or end not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    DOCS.write_text(f"{head}{begin}\n{block}\n{end}{tail}")


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
    gpu = _gpu_name()
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPU cores ({cpu}), " + (f"1 GPU ({gpu})" if gpu else "no GPU")


def _gpu_name() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout.strip() else None


def write_report(results: dict[str, Any], profile: dict[str, Any]) -> dict[str, Any] | None:
    """Plots, the generated docs block and (profile `summary_file`) the summary JSON of a finished run (also from a
    results.json copied from a GPU machine, or several merged). Returns the summary (None without per-task data)."""
    from arc_experiments.learning.report import ci_block, plot_curves, write_summary

    training, prefix = results["training"], profile["image_prefix"]
    plot_series(training, "reward", f"mean reward ({results['reward_mode']})", "Reward over GRPO steps",
                IMAGES / f"{prefix}_reward.png")
    plot_series({k: v for k, v in training.items() if v.get("teacher_kl")}, "teacher_kl",
                "teacher_kl (mean logp_student - logp_teacher)", "teacher_kl over GRPO steps",
                IMAGES / f"{prefix}_teacher_kl.png")
    summary, stats = None, None
    if results["heldout"].get("student", {}).get("per_task"):  # results written before per-task data existed lack it
        path = profile["summary_file"]
        if path:
            summary = write_summary(results, path)
            print(f"[demo] wrote {path}")
        else:
            from arc_experiments.learning.report import summary as summarise

            summary = summarise(results)
        stats = ci_block(summary, with_checks=bool(path))
        if any(summary["curves"].values()):
            plot_curves(summary["curves"], IMAGES / f"{prefix}_heldout_pass1.png")
    write_docs(results_block(results, prefix, stats), profile["docs_section"])
    return summary


def select_stages(stages: list[Stage], until: str | None, only: str | None, with_needs: bool) -> list[Stage]:
    """The stages to run: up to `until`, then those matching `only` (comma-separated shell patterns) and, with
    `with_needs`, the stages they need that are not done. SystemExit naming an unknown stage or a missing need."""
    names = [s.name for s in stages]
    if until and until not in names:
        raise SystemExit(f"[demo] --until {until}: no such stage; stages: {names}")
    if until:
        stages = stages[:names.index(until) + 1]
    if not only:
        return stages
    patterns = only.split(",")
    unknown = sorted(p for p in patterns if not any(fnmatch.fnmatchcase(s.name, p) for s in stages))
    if unknown:
        raise SystemExit(f"[demo] --only {only}: no stage {unknown}; stages: {[s.name for s in stages]}")
    by_name = {s.name: s for s in stages}
    chosen = {s.name for s in stages if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)}
    if with_needs:
        todo = list(chosen)
        while todo:
            for need in by_name[todo.pop()].needs:
                if need not in chosen and not by_name[need].done_file.exists():
                    chosen.add(need)
                    todo.append(need)
    kept = [s for s in stages if s.name in chosen]
    missing = [f"{s.name} needs {n}" for s in kept for n in s.needs
               if n not in chosen and not by_name[n].done_file.exists()]
    if missing:
        raise SystemExit(f"[demo] --only {only}: {', '.join(missing)}, which is neither done nor selected "
                         "(--with-needs adds it)")
    return kept


def outcome_line(results: dict[str, Any]) -> str | None:
    """One line on the console: the student against each arm's end (seeds pooled), with CIs when there are runs."""
    from arc_experiments.learning.report import summary as summarise

    if not results["heldout"].get("student", {}).get("per_task"):
        return None
    s = summarise(results, n_resamples=2000)
    parts = [f"held-out pass@1: student {pct(s['student_pass1'])}"]
    for key, label in (("grpo_opd", "GRPO + OPD"), ("grpo_only", "GRPO only")):
        if s[f"{key}_pass1"] is not None:
            parts.append(f"{label} {pct(s[f'{key}_pass1'])}")
    for name, t in s["teachers"].items():
        if t["pass1"] is not None:
            parts.append(f"{name} {pct(t['pass1'])}")
    if s["grpo_opd_minus_student_ci95"]:
        lo, hi = s["grpo_opd_minus_student_ci95"]
        parts.append(f"GRPO + OPD - student {100 * s['grpo_opd_minus_student']:+.1f} points "
                     f"[{100 * lo:+.1f}, {100 * hi:+.1f}]")
    return "[demo] " + ", ".join(parts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/demo", help="working folder (default outputs/demo)")
    parser.add_argument("--configs", default=str(CONFIGS), help="stage configs + profile.yaml (default configs/demo)")
    parser.add_argument("--until", help="stop after this stage (e.g. grpo-opd); continue later with --resume")
    parser.add_argument("--report", metavar="RESULTS_JSON", nargs="+", help="only rewrite the docs block, plots and "
                        "summary from a run's results.json (e.g. copied back from a GPU machine; several are merged)")
    parser.add_argument("--seed", type=int, default=0, help="model init, SFT, sampling and default RL seed (default 0)")
    parser.add_argument("--seeds", help="RL seeds, comma-separated (default: the profile's `seeds`)")
    parser.add_argument("--heldout-tasks", type=int, help="held-out synthetic tasks (default: the profile's, 96)")
    parser.add_argument("--n-predictions", type=int, help="attempts per held-out task (default: the profile's, 4)")
    parser.add_argument("--eval-every", type=int, help="evaluate RL checkpoints every N steps (default: the profile's)")
    parser.add_argument("--ablation", action="store_true", help="also run GRPO without the teacher")
    parser.add_argument("--only", help="run only these stages (comma-separated shell patterns; what they need must be "
                        "done or listed, or add --with-needs), e.g. model,student,grpo-only,eval-grpo-only")
    parser.add_argument("--with-needs", action="store_true", help="with --only: also run what the stages need and "
                        "is not done (a fresh machine: --only 'grpo-opd-s1,eval-grpo-opd-s1*' --with-needs)")
    parser.add_argument("--list", action="store_true", help="print the stages, their needs and what is done; run none")
    parser.add_argument("--resume", action="store_true", help="keep the finished stages of an earlier run in --out")
    parser.add_argument("--fresh", action="store_true", help="delete --out first")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/learning.md and docs/img")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    configs = Path(args.configs)
    profile = load_profile(configs)
    if args.seeds:
        profile["seeds"] = [int(x) for x in args.seeds.split(",")]
    if args.eval_every is not None:
        profile["eval_every"] = args.eval_every
    if args.report:
        from arc_experiments.learning.report import merge_results

        parts = [json.loads(Path(path).read_text()) for path in args.report]
        results = merge_results(parts) if len(parts) > 1 else parts[0]
        write_report(results, profile)
        print(f"[demo] wrote the {profile['docs_section']} block of {DOCS} and its plots from {', '.join(args.report)}")
        return results
    n_heldout = args.heldout_tasks or profile["heldout_tasks"]
    n_predictions = args.n_predictions or profile["n_predictions"]
    out = Path(args.out)
    stages = plan(out, args.seed, n_heldout, n_predictions, args.ablation, configs, profile)
    if args.list:
        for stage in stages:
            state = "done" if stage.done_file.exists() else "to do"
            print(f"{stage.name:32s} {state:6s} needs: {', '.join(stage.needs) or '-'}")
        return {}
    select_stages(stages, args.until, args.only, args.with_needs)  # a bad selection fails before --fresh deletes
    if args.fresh and out.exists():
        shutil.rmtree(out)
    selected = select_stages(stages, args.until, args.only, args.with_needs)
    if out.exists() and any(p.name != "logs" for p in out.iterdir()) and not args.resume:
        raise SystemExit(f"[demo] {out} already holds a run: pass --resume to continue it or --fresh to start over")
    out.mkdir(parents=True, exist_ok=True)

    results_path = out / "results.json"
    previous = json.loads(results_path.read_text()) if args.resume and results_path.exists() else {}
    stage_seconds: dict[str, float] = previous.get("stage_seconds", {})
    sampler = LoadSampler()
    config = read_yaml(configs / "grpo-opd.yaml")

    def write_results() -> dict[str, Any]:
        """OUT/results.json from every finished stage: after each stage (a GPU machine taken back mid-run leaves it)
        and at the end. Another invocation on the same --out (stages side by side) may have written since this one
        started: its stage seconds are kept."""
        latest = json.loads(results_path.read_text()) if results_path.exists() else {}
        seconds = {**latest.get("stage_seconds", {}), **stage_seconds}  # stage_seconds holds the previous ones
        loads = previous.get("loads", []) + list(sampler.values)
        results = {
            "seed": args.seed, "machine": machine(), "device": _gpu_name() or f"CPU ({platform.machine()})",
            "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
            "heldout_dataset": heldout_spec(n_heldout, profile["heldout_seed"], configs),
            "validation_dataset": heldout_spec(profile["validation_tasks"], profile["validation_seed"], configs)
            if profile["validation_tasks"] else None,
            "n_predictions": n_predictions, "temperature": config.get("temperature", 1.0),
            "reward_mode": config["reward_mode"], "stage_seconds": seconds,
            "total_seconds": sum(seconds.values()),
            "loads": loads, "load_mean": sum(loads) / len(loads), "load_max": max(loads),
            **collect_results(out, stages, configs, profile, n_predictions),
        }
        results_path.write_text(json.dumps(results, indent=2))
        return results

    failure = None
    try:
        run_stages(selected, out / "logs", stage_seconds, after_each=write_results)
    except SystemExit as error:  # a failed stage still leaves the results of the finished ones
        failure = error
    sampler.stop()
    results = write_results()
    if failure is not None:
        raise failure
    partial = len(selected) < len(stages)
    if partial:
        print(f"[demo] ran {len(selected)} of {len(stages)} stages (--until/--only); results so far in {results_path}; "
              "continue with --resume")
        return results
    if not args.no_docs:
        write_report(results, profile)
    line = outcome_line(results)
    print(f"{line}; total {results['total_seconds'] / 60:.1f} min; results in {results_path}" if line else
          f"[demo] done; results in {results_path}")
    return results


if __name__ == "__main__":
    main()
