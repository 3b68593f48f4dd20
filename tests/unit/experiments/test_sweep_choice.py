"""Choosing the GPU experiment's recipe on validation tasks (arc_experiments/learning/sweep_choice.py, configs/gpu/learning)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from arc_trl.tasks import load_tasks
from arc_experiments.learning import sweep_choice

VALIDATION = "synthetic:n=6,seed=4,difficulty=tiny,families=flip"


def _run(sweep_dir: Path, name: str, solved: int, step: int = 40) -> dict:
    """A finished sweep run whose last in-training evaluation solved the first `solved` tasks (2 attempts each)."""
    out = sweep_dir / name
    (out / "eval_arc").mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"eval_dataset": VALIDATION, "output_dir": str(out)}))
    tasks = load_tasks(VALIDATION)
    with open(out / "eval_arc" / f"step_{step:06d}.jsonl", "w") as f:
        for i, task in enumerate(tasks):
            for attempt in range(2):
                right = [g.tolist() if hasattr(g, "tolist") else g for g in task.test_outputs]
                predictions = right if i < solved else None
                f.write(json.dumps({"task_id": task.id, "attempt": attempt, "step": step,
                                    "outcome": {"test_predictions": predictions}}) + "\n")
    (out / "eval_arc" / "step_000000.jsonl").write_text("")  # an earlier evaluation: not the last one
    return {"name": name, "varied": {"learning_rate": solved}, "config": str(out / "config.yaml"),
            "output_dir": str(out)}


def test_runs_are_ranked_by_validation_pass1_with_paired_gaps(tmp_path):
    runs = [_run(tmp_path, "weak", 1), _run(tmp_path, "strong", 5), _run(tmp_path, "mid", 3)]
    (tmp_path / "late").mkdir()
    (tmp_path / "late" / "config.yaml").write_text(yaml.safe_dump({"eval_dataset": VALIDATION}))
    runs.append({"name": "late", "varied": {}, "config": str(tmp_path / "late" / "config.yaml"),
                 "output_dir": str(tmp_path / "late")})
    (tmp_path / "sweep_manifest.json").write_text(json.dumps({"name": "s", "runs": runs}))
    result = sweep_choice.rank(tmp_path, n_resamples=500)
    assert [r["name"] for r in result["runs"]] == ["strong", "mid", "weak"] and result["best"] == "strong"
    assert [r["pass1"] for r in result["runs"]] == [5 / 6, 3 / 6, 1 / 6]
    assert result["runs"][0]["step"] == 40 and result["not_evaluated"] == ["late"]
    assert result["runs"][2]["best_minus_this"] == 4 / 6 and result["runs"][2]["best_minus_this_ci95"][0] > 0
    assert sweep_choice.main([str(tmp_path), "--out", str(tmp_path / "choice.json")]) == 0
    assert json.loads((tmp_path / "choice.json").read_text())["best_values"] == {"learning_rate": 5}


def test_gpu_sweep_chooses_on_the_validation_set_never_on_held_out_tasks():
    from arc_experiments.learning import docs_block, runner  # noqa: F401
    from arc_experiments.learning import profile as profile_mod  # noqa: F401
    from arc_experiments.learning import results as results_mod  # noqa: F401
    from arc_experiments.learning import plan as plan_mod  # noqa: F401
    configs = Path("configs/gpu/learning")
    profile = profile_mod.load_profile(configs)
    sweep = yaml.safe_load((configs / "sweep.yaml").read_text())
    validation = profile_mod.heldout_spec(profile["validation_tasks"], profile["validation_seed"], configs)
    heldout = profile_mod.heldout_spec(profile["heldout_tasks"], profile["heldout_seed"], configs)
    assert sweep["fixed"]["eval_dataset"] == validation != heldout
    assert Path(sweep["base_config"]) == configs / "grpo-opd.yaml"
    seeds = {"validation": profile["validation_seed"], "heldout": profile["heldout_seed"]}
    for name in ("sft-student", "sft-teacher", "sft-teacher-privileged", "grpo-opd"):
        seeds[name] = int(yaml.safe_load((configs / f"{name}.yaml").read_text())["dataset"].split("seed=")[1][0])
    assert seeds["heldout"] not in {v for k, v in seeds.items() if k != "heldout"}
    assert seeds["validation"] not in {v for k, v in seeds.items() if k != "validation"}
    # the sweep distils from the profile's OPD teacher, with its privileged prompt
    teacher = profile_mod.teachers_of(configs, profile)[profile["opd_teacher"]]
    assert Path(sweep["fixed"]["teacher_model"]).name == teacher.name
    assert sweep["fixed"].get("teacher_privileged", "none") == teacher.privileged
