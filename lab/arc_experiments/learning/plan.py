"""The stages of a learning experiment (`plan`) and the choice of which to run (`select_stages`): each stage is one
command of the project's own (`python -m arc_trl X`, `python -m arc_experiments...`), a file that exists once it is
done, and the stages it needs."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path
from typing import Any

from arc_experiments.learning.profile import (
    CONFIGS,
    DEFAULT_PROFILE,
    Run,
    Stage,
    Teacher,
    checkpoint_steps,
    heldout_against,
    heldout_spec,
    opd_teacher_of,
    read_yaml,
    runs_of,
    teachers_of,
)


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
            py, "-m", "arc_trl", "evaluate", "generate", "--train-config", str(grpo_config), "--model", str(model_dir),
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
            py, "-m", "arc_trl", "train", "--config", str(grpo_config), "--model_name_or_path", str(student),
            "--output_dir", str(out / run.name), "--seed", str(run.seed), *save, *arm,
        ], out / run.name / "run_summary.json", needs=needs, kind="rl",
            info={"run": run.name, "arm": run.arm, "seed": run.seed, "steps": int(grpo["max_steps"])})

    def kl_probe(teacher: Teacher) -> Stage:
        """The teacher scores the student's own episodes; learning rate 0 keeps the student as it is."""
        name = f"kl-{teacher.name}"
        hint = ["--teacher_privileged", teacher.privileged] if teacher.privileged != "none" else []
        return Stage(name, [
            py, "-m", "arc_trl", "train", "--config", str(grpo_config), "--model_name_or_path", str(student),
            "--teacher_backend", "local", "--teacher_model", str(out / teacher.name), *hint, "--teacher_tau", "0",
            "--learning_rate", "0", "--max_steps", str(profile["kl_probe_steps"]), "--save_strategy", "no",
            "--collapse_guard", "off", "--output_dir", str(out / name), "--seed", str(seed),
        ], out / name / "run_summary.json", needs=("student", teacher.name), kind="kl", info={"teacher": teacher.name})

    def sft(name: str, config: Path, base: Path, target: Path, needs: str) -> Stage:
        return Stage(name, [py, "-m", "arc_trl", "sft", "--config", str(config), "--model_name_or_path", str(base),
                            "--output_dir", str(target), "--seed", str(seed)], target / "model.safetensors",
                     needs=(needs,), kind="sft")

    against = [f"{name}={spec}" for name, spec in heldout_against(configs, profile).items()]
    stages = [Stage("check-heldout", [py, "-m", "arc_experiments.learning.heldout_check", "--heldout", heldout,
                                      "--against", *against, "--out", str(out / "heldout_check.json")],
                    out / "heldout_check.json", kind="check")]  # always: select_stages keeps it until done
    stages += [
        Stage("model", model_command(py, profile, model, seed), model / "model.safetensors", kind="model"),
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



def select_stages(stages: list[Stage], until: str | None, only: str | None, with_needs: bool) -> list[Stage]:
    """The stages to run: up to `until`, then those matching `only` (comma-separated shell patterns) and, with
    `with_needs`, the stages they need that are not done; and the held-out check (kind `check`) whenever it is not
    done, whatever the selection: every held-out figure rests on it (the SmolLM2 experiment's machines, each running
    a selection, never ran it). SystemExit naming an unknown stage or a missing need."""
    names = [s.name for s in stages]
    if until and until not in names:
        raise SystemExit(f"[demo] --until {until}: no such stage; stages: {names}")
    if until:
        stages = stages[:names.index(until) + 1]
    if not only:
        return stages  # the held-out check is the first stage: `until` keeps it
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
    chosen |= {s.name for s in stages if s.kind == "check" and not s.done_file.exists()}
    kept = [s for s in stages if s.name in chosen]
    missing = [f"{s.name} needs {n}" for s in kept for n in s.needs
               if n not in chosen and not by_name[n].done_file.exists()]
    if missing:
        raise SystemExit(f"[demo] --only {only}: {', '.join(missing)}, which is neither done nor selected "
                         "(--with-needs adds it)")
    return kept


def model_command(py: str, profile: dict[str, Any], model: Path, seed: int) -> list[str]:
    """The model stage: a pretrained model imported from GGUF (`model_source`), else a random-init one of a shape."""
    source = profile["model_source"]
    if source:
        sources = [source] if isinstance(source, str) else list(source)
        return [py, "-m", "arc_trl", "import-gguf", *map(str, sources), "--out", str(model)]
    return [py, "-m", "arc_trl", "build-tiny-model", "--out", str(model), "--seed", str(seed),
            *map(str, profile["model_args"])]

