"""Choosing the GPU experiment's recipe on validation tasks (arc_experiments/learning/sweep_choice.py, configs/gpu/learning)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from arc_trl.tasks import load_tasks
from arc_experiments.learning import sweep_choice

VALIDATION = "synthetic:n=6,seed=4,difficulty=tiny,families=flip"


def _evaluation(out: Path, step: int, solved: int) -> None:
    """An in-training evaluation at `step` that solved the first `solved` validation tasks (2 attempts each)."""
    with open(out / "eval_arc" / f"step_{step:06d}.jsonl", "w") as f:
        for i, task in enumerate(load_tasks(VALIDATION)):
            for attempt in range(2):
                right = [g.tolist() if hasattr(g, "tolist") else g for g in task.test_outputs]
                predictions = right if i < solved else None
                f.write(json.dumps({"task_id": task.id, "attempt": attempt, "step": step,
                                    "outcome": {"test_predictions": predictions}}) + "\n")


def _run(sweep_dir: Path, name: str, solved: int, step: int = 40, variant: str | None = None,
         earlier: dict[int, int] | None = None, tau: float = 0.0) -> dict:
    """A finished sweep run whose evaluation at `step` solved `solved` tasks (and at `earlier` steps, as given)."""
    out = sweep_dir / name
    (out / "eval_arc").mkdir(parents=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"eval_dataset": VALIDATION, "output_dir": str(out),
                                                     "teacher_tau": tau}))
    _evaluation(out, step, solved)
    for earlier_step, earlier_solved in (earlier or {}).items():
        _evaluation(out, earlier_step, earlier_solved)
    (out / "eval_arc" / "step_000000.jsonl").write_text("")  # an evaluation that wrote nothing: no candidate
    return {"name": name, "variant": variant, "varied": {"learning_rate": solved}, "config": str(out / "config.yaml"),
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


def test_every_evaluated_step_is_a_candidate_and_each_variant_gets_its_best(tmp_path):
    """The step is part of the recipe: a run better at step 20 than at 40 is chosen at 20; each arm of the sweep
    (variant) has its own best, so GRPO alone is tuned as GRPO + OPD is."""
    runs = [_run(tmp_path, "grpo_a", 2, variant="grpo", earlier={20: 3}),
            _run(tmp_path, "grpo_b", 1, variant="grpo"),
            _run(tmp_path, "opd_a", 4, variant="opd", earlier={20: 5}, tau=0.1),
            _run(tmp_path, "opd_b", 5, variant="opd", tau=1.0)]
    (tmp_path / "sweep_manifest.json").write_text(json.dumps({"name": "s", "runs": runs}))
    result = sweep_choice.rank(tmp_path, n_resamples=200)
    assert [(r["name"], r["step"]) for r in result["runs"][:3]] == [("opd_a", 20), ("opd_b", 40), ("opd_a", 40)]
    assert (result["best"], result["best_step"]) == ("opd_a", 20)  # a tie goes to the fewer steps
    assert {v: (b["name"], b["step"]) for v, b in result["best_per_variant"].items()} == {
        "opd": ("opd_a", 20), "grpo": ("grpo_a", 20)}
    assert {a: (b["name"], b["step"]) for a, b in result["best_per_arm"].items()} == {
        "grpo-opd": ("opd_a", 20), "grpo-only": ("grpo_a", 20)}  # the arm: teacher_tau 0 or not
    assert result["best_per_variant"]["grpo"]["pass1"] == 3 / 6 and result["not_evaluated"] == []


@pytest.mark.parametrize("configs", ["configs/gpu/learning", "configs/gpu/smollm2"])
def test_gpu_sweep_chooses_on_the_validation_set_never_on_held_out_tasks(configs):
    from arc_experiments.learning import docs_block, runner  # noqa: F401
    from arc_experiments.learning import profile as profile_mod  # noqa: F401
    from arc_experiments.learning import results as results_mod  # noqa: F401
    from arc_experiments.learning import plan as plan_mod  # noqa: F401
    configs = Path(configs)
    profile = profile_mod.load_profile(configs)
    sweep = yaml.safe_load((configs / "sweep.yaml").read_text())
    validation = profile_mod.heldout_spec(profile["validation_tasks"], profile["validation_seed"], configs)
    heldout = profile_mod.heldout_spec(profile["heldout_tasks"], profile["heldout_seed"], configs)
    assert sweep["fixed"]["eval_dataset"] == validation != heldout
    assert Path(sweep["base_config"]) == configs / "grpo-opd.yaml"
    seeds = {"validation": profile["validation_seed"], "heldout": profile["heldout_seed"]}
    for path in [*configs.glob("sft-*.yaml"), configs / "grpo-opd.yaml"]:
        seeds[path.stem] = int(yaml.safe_load(path.read_text())["dataset"].split("seed=")[1][0])
    assert seeds["heldout"] not in {v for k, v in seeds.items() if k != "heldout"}
    assert seeds["validation"] not in {v for k, v in seeds.items() if k != "validation"}
    # the sweep distils from the profile's OPD teacher, with its privileged prompt
    teacher = profile_mod.teachers_of(configs, profile)[profile["opd_teacher"]]
    assert Path(sweep["fixed"]["teacher_model"]).name == teacher.name
    assert sweep["fixed"].get("teacher_privileged", "none") == teacher.privileged
