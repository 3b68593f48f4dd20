"""The CPU learning demo in one command: a tiny model learns synthetic ARC tasks in the REPL, end to end.

    python scripts/demo_learning.py              # ~10 min on 2 CPU cores (~14 with --ablation), writes docs/learning.md
    python scripts/demo_learning.py --resume     # continue an interrupted run (finished stages are kept)
    python scripts/demo_learning.py --ablation   # also GRPO without the teacher, from the same student
    python scripts/demo_learning.py --configs configs/gpu/learning --out /tmp/arc-gpu/learning   # the GPU run

Every stage runs the project's own entry point (output in OUT/logs/<stage>.log):

1. model      scripts/build_tiny_model.py                          random-init Qwen3 + local tokenizer
2. student    scripts/sft.py --config configs/demo/sft-student.yaml   short SFT warm start (reference episodes)
3. teacher    scripts/sft.py --config configs/demo/sft-teacher.yaml   the student trained longer: the OPD teacher
4. eval       scripts/evaluate.py generate                         held-out tasks before RL (student and teacher)
5. grpo-opd   scripts/train.py --config configs/demo/grpo-opd.yaml    GRPO + on-policy distillation
6. eval       scripts/evaluate.py generate                         the same held-out tasks after RL

Then OUT/results.json, the plots (docs/img/<prefix>_*.png) and the generated block of docs/learning.md.

The folder given by `--configs` holds the stage configs (sft-student.yaml, sft-teacher.yaml, grpo-opd.yaml) and a
`profile.yaml` (model shape, evaluation backend, held-out size, docs section): configs/demo is the CPU demo,
configs/gpu/learning the GPU run. `--until STAGE` stops after a stage (to split a run over several device calls,
then `--resume`); `--report results.json` rewrites the docs block and plots from a finished run's results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = Path("configs/demo")
GRPO_CONFIG = CONFIGS / "grpo-opd.yaml"
DOCS = Path("docs/learning.md")
IMAGES = Path("docs/img")
BEGIN, END = "<!-- demo-results:begin -->", "<!-- demo-results:end -->"
WINDOW = 10  # training steps averaged at the start and at the end of RL
# profile.yaml keys and their values for the CPU demo (configs/demo/profile.yaml may override them)
DEFAULT_PROFILE: dict[str, Any] = {
    "model_args": [],
    "eval_args": ["--backend", "transformers", "--batch-size", "128", "--workers", "2"],
    "heldout_tasks": 96,
    "n_predictions": 4,
    "docs_section": "demo",
    "image_prefix": "learning",
}


@dataclass
class Stage:
    name: str
    command: list[str]
    done_file: Path  # exists once the stage has finished
    needs: tuple[str, ...] = ()  # stages whose outputs it reads


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
    """The held-out curriculum: the RL dataset's families and difficulty with another seed (SFT 0, RL 2, eval 1)."""
    from arc_trl.synthetic.spec import parse_synthetic_spec

    spec = parse_synthetic_spec(read_yaml(configs / "grpo-opd.yaml")["dataset"])
    families = "+".join(spec["families"] or [])
    spec_text = f"synthetic:n={n_tasks},seed={seed},difficulty={spec['difficulty']}"
    return spec_text + (f",families={families}" if families else "")


def plan(out: Path, seed: int, n_heldout: int, n_predictions: int, ablation: bool, configs: Path = CONFIGS,
         profile: dict[str, Any] | None = None) -> list[Stage]:
    py = sys.executable
    profile = profile or DEFAULT_PROFILE
    grpo_config = configs / "grpo-opd.yaml"
    model, student, teacher = out / "model", out / "student", out / "teacher"
    heldout = heldout_spec(n_heldout, configs=configs)

    def evaluate(name: str, model_dir: Path, needs: str) -> Stage:
        folder = out / "eval" / name
        return Stage(f"eval-{name}", [
            py, "scripts/evaluate.py", "generate", "--train-config", str(grpo_config), "--model", str(model_dir),
            "--dataset", heldout, "--output-dir", str(folder), "--n-predictions", str(n_predictions),
            "--seed", str(seed), "--no-progress", *map(str, profile["eval_args"]),
        ], folder / "metrics.json", needs=(needs,))

    def rl(name: str, *extra: str, needs: tuple[str, ...]) -> Stage:
        return Stage(name, [
            py, "scripts/train.py", "--config", str(grpo_config), "--model_name_or_path", str(student),
            "--teacher_model", str(teacher), "--output_dir", str(out / name), "--seed", str(seed), *extra,
        ], out / name / "run_summary.json", needs=needs)

    def sft(name: str, base: Path, target: Path, needs: str) -> Stage:
        return Stage(name, [py, "scripts/sft.py", "--config", str(configs / f"sft-{name}.yaml"), "--model_name_or_path",
                            str(base), "--output_dir", str(target), "--seed", str(seed)], target / "model.safetensors",
                     needs=(needs,))

    stages = [
        Stage("model", [py, "scripts/build_tiny_model.py", "--out", str(model), "--seed", str(seed),
                        *map(str, profile["model_args"])], model / "model.safetensors"),
        sft("student", model, student, needs="model"),
        sft("teacher", student, teacher, needs="student"),
        evaluate("student", student, needs="student"),
    ]
    if ablation:  # the same run without the teacher term
        stages.append(rl("grpo-only", "--teacher_backend", "none", "--teacher_tau", "0", needs=("student",)))
    stages += [
        evaluate("teacher", teacher, needs="teacher"),
        rl("grpo-opd", needs=("student", "teacher")),
        evaluate("grpo-opd", out / "grpo-opd", needs="grpo-opd"),
    ]
    if ablation:
        stages.append(evaluate("grpo-only", out / "grpo-only", needs="grpo-only"))
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


def run_stages(stages: list[Stage], logs: Path) -> dict[str, float]:
    """Run, in list order, the stages whose done file is missing; seconds of each stage run. A failed stage ends the
    run (SystemExit); the finished ones are kept for --resume."""
    seconds: dict[str, float] = {}
    for stage in stages:
        if stage.done_file.exists():
            print(f"[demo] {stage.name}: already done ({stage.done_file})")
        else:
            seconds[stage.name] = round(run_stage(stage, logs), 1)
    return seconds


# ------------------------------------------------------------------------------------------------------ measuring
def heldout_metrics(folder: Path, reward_mode: str, agent_mode: str) -> dict[str, Any]:
    """Solve rate, pass@k, valid submissions, pixel score (evaluate.py's metrics.json) and the mean training reward
    of the attempts (recomputed from each attempt's outcome in completions.jsonl)."""
    from arc_trl.data import load_tasks
    from arc_trl.rewards.modes import compute_reward

    metrics = json.loads((folder / "metrics.json").read_text())
    records = [json.loads(line) for line in (folder / "completions.jsonl").read_text().splitlines() if line.strip()]
    tasks = {t.id: t for t in load_tasks(metrics["dataset"])}
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
    for (name, run), color in zip(runs.items(), ("tab:blue", "tab:orange")):
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


def results_block(results: dict[str, Any], image_prefix: str = "learning") -> str:
    ev, runs = results["heldout"], results["training"]
    columns = [("student", "student (SFT warm start, before RL)"), ("grpo-opd", "after GRPO + OPD"),
               ("grpo-only", "after GRPO only (ablation)"), ("teacher", "teacher (longer SFT)")]
    columns = [(k, title) for k, title in columns if k in ev]
    first = next(iter(ev.values()))
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
    lines += ["", f"| RL training (first / last {WINDOW} steps) | " + " | ".join(runs) + " |",
              "|---|" + "---|" * len(runs)]
    for label, key, fmt in (("mean reward", "reward", num), ("valid submissions", "valid", pct),
                            ("exact test grids", "exact", pct), ("teacher_kl", "teacher_kl", num)):
        cells = []
        for run in runs.values():
            a, b = run.get(f"{key}_first"), run.get(f"{key}_last")
            cells.append("-" if a is None else f"{fmt(a)} -> {fmt(b)}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    kl = runs.get("grpo-opd", {}).get("teacher_kl") or []
    if kl:
        lines.append(f"\nteacher_kl at the first step {kl[0]:.3f}, at the last step {kl[-1]:.3f}.")
    times = ", ".join(f"{name} {s:.0f} s" for name, s in results["stage_seconds"].items())
    lines += [
        "",
        f"Run: seed {results['seed']}, {results['machine']}, total wall time {results['total_seconds'] / 60:.1f} min "
        f"({times}); 1-minute load average during the run {results['load_mean']:.1f} on average, "
        f"{results['load_max']:.1f} at most ({results['cpus']} CPUs: a load above that means other processes "
        "were competing for them). Written by "
        f"`python scripts/demo_learning.py` on {results['date']}.",
        "",
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


def write_report(results: dict[str, Any], profile: dict[str, Any]) -> None:
    """Plots and the generated docs block of a finished run (also from a results.json copied from a GPU machine)."""
    training, prefix = results["training"], profile["image_prefix"]
    plot_series(training, "reward", f"mean reward ({results['reward_mode']})", "Reward over GRPO steps",
                IMAGES / f"{prefix}_reward.png")
    plot_series({k: v for k, v in training.items() if v.get("teacher_kl")}, "teacher_kl",
                "teacher_kl (mean logp_student - logp_teacher)", "teacher_kl over GRPO steps",
                IMAGES / f"{prefix}_teacher_kl.png")
    write_docs(results_block(results, prefix), profile["docs_section"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/demo", help="working folder (default outputs/demo)")
    parser.add_argument("--configs", default=str(CONFIGS), help="stage configs + profile.yaml (default configs/demo)")
    parser.add_argument("--until", help="stop after this stage (e.g. grpo-opd); continue later with --resume")
    parser.add_argument("--report", metavar="RESULTS_JSON", help="only rewrite the docs block and plots from a run's "
                        "results.json (e.g. one copied back from a GPU machine)")
    parser.add_argument("--seed", type=int, default=0, help="model init, SFT, RL and sampling seed (default 0)")
    parser.add_argument("--heldout-tasks", type=int, help="held-out synthetic tasks (default: the profile's, 96)")
    parser.add_argument("--n-predictions", type=int, help="attempts per held-out task (default: the profile's, 4)")
    parser.add_argument("--ablation", action="store_true", help="also run GRPO without the teacher")
    parser.add_argument("--only", help="run only these stages (comma-separated; what they need must be done or "
                        "listed), e.g. model,student,grpo-only,eval-grpo-only on a fresh machine")
    parser.add_argument("--resume", action="store_true", help="keep the finished stages of an earlier run in --out")
    parser.add_argument("--fresh", action="store_true", help="delete --out first")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/learning.md and docs/img")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    configs = Path(args.configs)
    profile = load_profile(configs)
    if args.report:
        results = json.loads(Path(args.report).read_text())
        write_report(results, profile)
        print(f"[demo] wrote the {profile['docs_section']} block of {DOCS} and its plots from {args.report}")
        return results
    n_heldout = args.heldout_tasks or profile["heldout_tasks"]
    n_predictions = args.n_predictions or profile["n_predictions"]
    out = Path(args.out)
    if args.fresh and out.exists():
        shutil.rmtree(out)
    if out.exists() and any(p.name != "logs" for p in out.iterdir()) and not args.resume:
        raise SystemExit(f"[demo] {out} already holds a run: pass --resume to continue it or --fresh to start over")
    out.mkdir(parents=True, exist_ok=True)

    results_path = out / "results.json"
    previous = json.loads(results_path.read_text()) if args.resume and results_path.exists() else {}
    stage_seconds: dict[str, float] = previous.get("stage_seconds", {})
    sampler = LoadSampler()
    stages = plan(out, args.seed, n_heldout, n_predictions, args.ablation, configs, profile)
    if args.until and args.until not in [s.name for s in stages]:
        raise SystemExit(f"[demo] --until {args.until}: no such stage; stages: {[s.name for s in stages]}")
    if args.until:
        stages = stages[:[s.name for s in stages].index(args.until) + 1]
    if args.only:
        only = args.only.split(",")
        unknown = sorted(set(only) - {s.name for s in stages})
        if unknown:
            raise SystemExit(f"[demo] --only {args.only}: no stage {unknown}; stages: {[s.name for s in stages]}")
        kept = [s for s in stages if s.name in only]
        missing = [f"{s.name} needs {n}" for s in kept for n in s.needs
                   if n not in only and not next(t for t in stages if t.name == n).done_file.exists()]
        if missing:
            raise SystemExit(f"[demo] --only {args.only}: {', '.join(missing)}, which is neither done nor selected")
        stages = kept
    stage_seconds.update(run_stages(stages, out / "logs"))
    if args.until or args.only:
        results_path.write_text(json.dumps({**previous, "stage_seconds": stage_seconds}, indent=2))
        print(f"[demo] stopped after {args.until or args.only} (--until/--only); continue with --resume")
        return {}
    loads = previous.get("loads", []) + sampler.stop()

    config = read_yaml(configs / "grpo-opd.yaml")
    heldout = {name: heldout_metrics(out / "eval" / name, config["reward_mode"], config["agent_mode"])
               for name in ("student", "teacher", "grpo-opd", "grpo-only") if (out / "eval" / name).exists()}
    training = {name: training_metrics(out / name) for name in ("grpo-opd", "grpo-only") if (out / name).exists()}
    results = {
        "seed": args.seed, "machine": machine(), "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
        "heldout_dataset": heldout_spec(n_heldout, configs=configs), "temperature": config.get("temperature", 1.0),
        "reward_mode": config["reward_mode"], "stage_seconds": stage_seconds,
        "total_seconds": sum(stage_seconds.values()),
        "loads": loads, "load_mean": sum(loads) / len(loads), "load_max": max(loads),
        "heldout": heldout, "training": training,
    }
    results_path.write_text(json.dumps(results, indent=2))
    if not args.no_docs:
        write_report(results, profile)
    s, a = heldout["student"], heldout["grpo-opd"]
    t = training["grpo-opd"]
    print(f"[demo] held-out solve rate {pct(s['solve_rate'])} -> {pct(a['solve_rate'])}, valid submissions "
          f"{pct(s['valid_outputs'])} -> {pct(a['valid_outputs'])}, mean reward {num(s['mean_reward'])} -> "
          f"{num(a['mean_reward'])}; training reward (first/last {WINDOW} steps) {num(t['reward_first'])} -> "
          f"{num(t['reward_last'])}; teacher_kl {num(t['teacher_kl_first'])} -> {num(t['teacher_kl_last'])}; "
          f"total {results['total_seconds'] / 60:.1f} min; results in {results_path}")
    return results


if __name__ == "__main__":
    main()
