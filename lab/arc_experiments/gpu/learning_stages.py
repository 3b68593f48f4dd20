"""GPU stages of the learning experiment (configs/gpu/learning): all of it, or the pieces one machine can hold."""

from __future__ import annotations

import shutil
import sys

from arc_experiments.gpu.runner import ROOT, Context, failed, first_step, run, start

LONG = 3000  # seconds: stages that hold several of the experiment's steps


def learning(ctx: Context) -> int:
    """The whole experiment of configs/gpu/learning/profile.yaml, one stage after the other (~75-80 min on an H100;
    split it over machines with `pieces` and merge with `python -m arc_experiments.learning --report`)."""
    return run(ctx, "learning", max(ctx.limit, LONG), ctx.demo())


def policy(ctx: Context) -> int:
    """The realistic policy and its evaluations: the experiment up to eval-teacher."""
    return run(ctx, "policy", ctx.limit, ctx.demo("--until", "eval-teacher"))


def student(ctx: Context) -> int:
    """The SFT student alone (the policy of every GPU measurement)."""
    return run(ctx, "student", ctx.limit, ctx.demo("--until", "student"))


def ensure_student(ctx: Context) -> int:
    return 0 if ctx.has_student() and not ctx.dry_run else student(ctx)


def control(ctx: Context) -> int:
    """The GRPO-only arm of training seed `--seed` (default 0) and its evaluations, with what it needs."""
    s = 0 if ctx.seed is None else ctx.seed
    return run(
        ctx, "control", max(ctx.limit, LONG), ctx.demo("--only", f"grpo-only-s{s},eval-grpo-only-s{s}*", "--with-needs")
    )


def teachers(ctx: Context) -> int:
    """The privileged teacher and the student on the held-out tasks, and the teacher's teacher_kl to the student:
    the student-teacher gap to measure before any RL run."""
    only = ctx.only or "teacher-privileged,eval-student,eval-teacher-privileged,kl-teacher-privileged"
    return run(ctx, "teachers", max(ctx.limit, LONG), ctx.demo("--only", only, "--with-needs"))


def pieces(ctx: Context) -> int:
    """Some stages of the experiment (`--only` patterns) with what they need: one machine's share."""
    if not ctx.only:
        raise SystemExit("pieces: name the experiment's stages with --only (shell patterns, comma-separated)")
    return run(ctx, "pieces", max(ctx.limit, LONG), ctx.demo("--only", ctx.only, "--with-needs"))


def seedpair(ctx: Context) -> int:
    """Both arms of training seed `--seed` (default 1) from this machine's student and privileged teacher, each held-out
    evaluation beside the next RL run: a second vLLM at 0.25 of the GPU (a 0.6B run holds ~34 GiB)."""
    import yaml

    s, side = 1 if ctx.seed is None else ctx.seed, ctx.work / "configs-side"
    if not ctx.dry_run:
        shutil.rmtree(side, ignore_errors=True)
        shutil.copytree(ROOT / ctx.configs, side)  # the checkout's, wherever this runs from
        profile = yaml.safe_load((side / "profile.yaml").read_text())
        args = profile["eval_args"]
        for flag, value in (("--gpu-memory-utilization", "0.25"), ("--workers", "8")):
            if flag not in args:
                raise SystemExit(f"seedpair: {flag} is no longer in profile.yaml's eval_args; mend this stage")
            args[args.index(flag) + 1] = value
        (side / "profile.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    codes = [run(ctx, "shared", ctx.limit, ctx.demo("--only", ctx.only or "teacher-privileged", "--with-needs"))]

    def beside(rl: str, evaluation: str) -> None:
        process = start(ctx, rl, ctx.demo("--only", rl))
        first_step(ctx.learning / "logs" / f"{rl}.log", process)
        codes.append(run(ctx, evaluation, ctx.limit, ctx.demo("--only", evaluation, configs=side)))
        codes.append(process.wait() if process is not None else 0)

    beside(f"grpo-opd-s{s}", "eval-student")
    beside(f"grpo-only-s{s}", f"eval-grpo-opd-s{s}")
    codes.append(run(ctx, f"eval-grpo-only-s{s}", ctx.limit, ctx.demo("--only", f"eval-grpo-only-s{s}")))
    return failed(*codes)


def _two_at_a_time(ctx: Context, sweep_file: str, folder: str) -> list[int]:
    """The experiment's student and privileged teacher, then the runs of `sweep_file` (configs written into
    WORK/<experiment>/`folder`), two at a time: the next starts once the one before has logged a step."""
    codes = [
        run(ctx, "shared", ctx.limit, ctx.demo("--only", "teacher-privileged", "--with-needs")),
        run(ctx, f"{folder}-configs", 300, [sys.executable, "-m", "arc_trl", "sweep", f"{ctx.configs}/{sweep_file}",
                                            "--dry-run", "--command", f"{sys.executable} -m arc_trl train"]),
    ]
    running = []
    for config in sorted((ctx.learning / folder).glob("*/config.yaml")):
        name = config.parent.name
        train = [sys.executable, "-m", "arc_trl", "train", "--config", str(config)]
        process = start(ctx, f"{folder}-{name}", train)
        first_step(ctx.work / "logs" / f"{folder}-{name}.log", process)
        running.append(process)
        if len(running) >= 2 and running[0] is not None:
            codes.append(running.pop(0).wait())
    return codes + [p.wait() for p in running if p is not None]


def _need(ctx: Context, stage: str, name: str) -> None:
    """Stop `stage` naming the experiment file it needs when --configs lacks it (configs/gpu/smollm2 has them all)."""
    if not (ROOT / ctx.configs / name).exists():
        raise SystemExit(f"{stage}: {ctx.configs}/{name} not found (configs/gpu/smollm2/{name} is one); pass --configs")


def _ranked(ctx: Context, sweep_file: str, folder: str, label: str) -> int:
    """The runs of `sweep_file` two at a time, then ranked on the validation tasks (sweep_choice: choice.json)."""
    codes = _two_at_a_time(ctx, sweep_file, folder)
    out = ctx.learning / folder
    choice = [sys.executable, "-m", "arc_experiments.learning.sweep_choice", str(out),
              "--out", str(out / "choice.json")]
    return failed(*codes, run(ctx, label, 300, choice))


def sweep(ctx: Context) -> int:
    """The experiment's sweep.yaml: runs from this machine's student and privileged teacher, each scored on the
    validation tasks in training, two at a time, then ranked on the validation tasks (never the held-out ones)."""
    return _ranked(ctx, "sweep.yaml", "sweep", "sweep-choice")


def temperature(ctx: Context) -> int:
    """sweep-temperature.yaml: each arm's sweep-chosen recipe at another sampling temperature, scored on the validation
    tasks like the sweep's runs (whose T = 1.0 rows are the reference), two at a time, then ranked."""
    _need(ctx, "temperature", "sweep-temperature.yaml")
    return _ranked(ctx, "sweep-temperature.yaml", "sweep-temperature", "temperature-choice")


def arms(ctx: Context) -> int:
    """The experiment's arms.yaml: each arm with its validation-chosen recipe, three seeds, two at a time, each run
    scored in training on the held-out tasks (steps 0, 20, 40), then the seed-aware summary (arms_report)."""
    from arc_experiments.learning.profile import load_profile

    _need(ctx, "arms", "arms.yaml")
    chosen = [f"{arm}={step}" for arm, step in load_profile(ROOT / ctx.configs)["chosen_steps"].items()]
    codes = _two_at_a_time(ctx, "arms.yaml", "arms")
    out = ctx.learning / "arms"
    report = [sys.executable, "-m", "arc_experiments.learning.arms_report", str(out),
              "--out", str(out / "summary.json"), *(["--chosen-steps", *chosen] if chosen else [])]
    return failed(*codes, run(ctx, "arms-report", 300, report))


ARC_AGI_1 = "arc-agi-1/eval"


def arc_agi_1(ctx: Context) -> int:
    """The student and GRPO alone with its chosen recipe (arms.yaml's s0_grpo-only, the profile's chosen step) on
    ARC-AGI-1's 400 evaluation tasks with the REPL agent, 2 attempts each (pass@1, pass@2). Prompts longer than the
    model's context leave their tasks unattempted: metrics.json counts them (`n_dropped_tasks`), they score 0 in
    arc_agi_report's pass@k over the 400 tasks (arc-agi-1/summary.json)."""
    import yaml

    from arc_experiments.learning.profile import load_profile

    _need(ctx, "arc-agi-1", "arms.yaml")
    steps = load_profile(ROOT / ctx.configs)["chosen_steps"].get("grpo-only", 40)
    codes = [
        run(ctx, "shared", ctx.limit, ctx.demo("--only", "student", "--with-needs")),
        run(ctx, "arms-configs", 300, [sys.executable, "-m", "arc_trl", "sweep", f"{ctx.configs}/arms.yaml",
                                       "--dry-run", "--command", f"{sys.executable} -m arc_trl train"]),
    ]
    config, best = ctx.learning / "arms" / "s0_grpo-only" / "config.yaml", ctx.learning / "arc-agi-1" / "grpo-only"
    codes.append(run(ctx, "arc-agi-1-grpo-only", max(ctx.limit, LONG), [
        sys.executable, "-m", "arc_trl", "train", "--config", str(config), "--max_steps", str(steps), "--output_dir",
        str(best), "--eval_every_steps", "0", "--eval_at_start", "false", "--save_strategy", "no"]))
    context = 8192  # SmolLM2's max_position_embeddings
    if not ctx.dry_run and (ctx.learning / "model" / "config.json").exists():
        context = yaml.safe_load((ctx.learning / "model" / "config.json").read_text())["max_position_embeddings"]
    budget = int(yaml.safe_load((ROOT / ctx.configs / "grpo-opd.yaml").read_text())["max_completion_length"])
    for name, model in (("student", ctx.learning / "student"), ("grpo-only", best)):
        folder = ctx.learning / "arc-agi-1" / f"eval-{name}"
        codes.append(run(ctx, f"arc-agi-1-eval-{name}", max(ctx.limit, LONG), [
            sys.executable, "-m", "arc_trl", "evaluate", "generate", "--train-config", f"{ctx.configs}/grpo-opd.yaml",
            "--model", str(model), "--dataset", ARC_AGI_1, "--output-dir", str(folder), "--n-predictions", "2",
            "--seed", "0", "--no-progress", "--max-prompt-tokens", str(context - budget), "--max-model-len",
            str(context), "--backend", "vllm", "--gpu-memory-utilization", "0.6", "--workers", "16"]))
    folder = ctx.learning / "arc-agi-1"
    figures = [sys.executable, "-m", "arc_experiments.learning.arc_agi_report", str(folder), "--out",
               str(folder / "summary.json")]
    return failed(*codes, run(ctx, "arc-agi-1-report", 300, figures))
