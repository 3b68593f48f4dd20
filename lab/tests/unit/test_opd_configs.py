"""Issue 41's configs (configs/gpu/smollm2/opd-*.yaml): every run resolves and parses, and each arm's runs differ from
GRPO alone's only in that arm's keys (plus the sweep's per-run folder, name and W&B group), on the experiment's own
validation and held-out sets, and the RL-teacher arms read the folder the teacher run writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from arc_experiments.learning.profile import heldout_spec, load_profile
from arc_trl.launch.sweep import expand_sweep, load_sweep

CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "gpu" / "smollm2"
PER_RUN = {"output_dir", "run_name", "env"}  # set by the sweep per run (may coincide)
ARM_KEYS = {
    "opd-peer": {"teacher_backend", "teacher_privileged", "teacher_tau"},
    "opd-rl-mixed": {"teacher_backend", "teacher_model", "teacher_tau"},
    "opd-rl-pure": {"teacher_backend", "teacher_model", "teacher_tau", "adv_tau"},
}


def _runs(name: str) -> dict[str, dict]:
    return {r.name: r.config for r in expand_sweep(load_sweep(CONFIGS / name))}


def _differ(a: dict, b: dict) -> set[str]:
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, dict]]:
    names = ["teacher", "heldout", *(f"sweep-{a}" for a in ("grpo-only", *ARM_KEYS))]
    return {n: _runs(f"opd-{n}.yaml") for n in names}


def test_each_validation_arm_is_grpo_alone_plus_its_own_keys(runs):
    control = runs["sweep-grpo-only"]
    assert sorted(control) == ["lr2e-05", "lr5e-05"]
    for arm, keys in ARM_KEYS.items():
        sweep = runs[f"sweep-{arm}"]
        assert len(sweep) == (2 if arm == "opd-rl-pure" else 4)
        for name, config in sweep.items():
            lr = name.split("_")[0]
            assert _differ(config, control[lr]) - PER_RUN == keys, (arm, name)
            assert config["teacher_tau"] > 0


def test_each_heldout_arm_is_the_heldout_control_plus_its_own_keys_on_the_heldout_set(runs):
    heldout, profile = runs["heldout"], load_profile(CONFIGS)
    assert sorted(heldout) == sorted(f"s{s}_{a}" for s in range(3) for a in ("grpo-only", *ARM_KEYS))
    for name, config in heldout.items():
        seed, arm = name.split("_", 1)
        if arm != "grpo-only":
            assert _differ(config, heldout[f"{seed}_grpo-only"]) - PER_RUN - {"learning_rate"} == ARM_KEYS[arm]
        assert config["eval_dataset"] == heldout_spec(256, profile["heldout_seed"], CONFIGS)
        assert config["seed"] == int(seed[1:]) and config["eval_at_start"] and config["max_steps"] == 40
    validation = heldout_spec(profile["validation_tasks"], profile["validation_seed"], CONFIGS)
    for sweep in (n for n in runs if n.startswith("sweep-")):
        assert all(c["eval_dataset"] == validation and not c["eval_at_start"] for c in runs[sweep].values())
    # the held-out control is the validation control at lr 5e-5, scored on the held-out set from step 0
    assert _differ(heldout["s0_grpo-only"], runs["sweep-grpo-only"]["lr5e-05"]) - PER_RUN == \
        {"eval_dataset", "eval_at_start"}


def test_the_teacher_is_grpo_alone_trained_longer_and_the_rl_arms_read_its_output_dir(runs):
    (teacher,) = runs["teacher"].values()
    control = runs["sweep-grpo-only"]["lr5e-05"]
    assert _differ(teacher, control) - PER_RUN == {"max_steps", "eval_dataset", "eval_every_steps", "eval_at_start"}
    assert teacher["max_steps"] == 128 > runs["heldout"]["s0_grpo-only"]["max_steps"]
    assert teacher["eval_at_start"] and teacher["max_steps"] % teacher["eval_every_steps"] == 0  # 0, 64, 128
    for sweep in ("sweep-opd-rl-mixed", "sweep-opd-rl-pure", "heldout"):
        models = {c["teacher_model"] for c in runs[sweep].values() if c["teacher_backend"] == "local"}
        assert models == {teacher["output_dir"]}, sweep


def test_every_run_parses_as_arc_trl_train_would(runs, tmp_path):
    import yaml

    from arc_trl.train_entry import parse_config

    model = tmp_path / "model"  # the GPU machine's student folder (/tmp/arc-gpu/...) stands in here
    model.mkdir()
    (model / "config.json").write_text("{}")
    for group, configs in runs.items():
        for name, config in configs.items():
            path = tmp_path / f"{group}-{name}.yaml"
            path.write_text(yaml.safe_dump(config))
            _, arc, args, _ = parse_config(["--config", str(path), "--bf16", "false", "--use_cpu", "true",
                                            "--model_name_or_path", str(model)])
            assert (arc.teacher_tau, args.learning_rate) == (config["teacher_tau"], config["learning_rate"])
