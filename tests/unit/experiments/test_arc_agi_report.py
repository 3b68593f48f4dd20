"""arc_agi_report: real-ARC pass@k over the whole dataset, unattempted tasks counted as failures."""

from __future__ import annotations

import json

import pytest

from arc_experiments.learning.arc_agi_report import main, model_figures, report


def _folder(path, attempts, n_dataset_tasks=None):
    """A scored generate folder from {task: [passed per attempt]} (pass@k as arc_trl.eval.passk computes it)."""
    path.mkdir(parents=True)
    rows = [{"task_id": t, "attempt": i, "passed": p} for t, ps in attempts.items() for i, p in enumerate(ps)]
    (path / "per_attempt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    n = len(attempts)
    pass1 = sum(sum(ps) / len(ps) for ps in attempts.values()) / n
    pass2 = sum(any(ps) for ps in attempts.values()) / n
    (path / "pass_at_k.json").write_text(json.dumps({"n_tasks": n, "pass_at_k": {"1": pass1, "2": pass2}}))
    metrics = {"dataset": "arc-agi-1/eval", "valid_outputs": 0.9, "n_tasks": n}
    if n_dataset_tasks is not None:
        metrics["n_dataset_tasks"] = n_dataset_tasks
    (path / "metrics.json").write_text(json.dumps(metrics))
    return path


def test_unattempted_tasks_count_as_failures(tmp_path):
    # 4 attempted tasks: a solved twice, b once, c and d never; the dataset has 5 (one prompt was too long)
    attempts = {"a": [True, True], "b": [False, True], "c": [False, False], "d": [False, False]}
    figures = model_figures(_folder(tmp_path / "eval-x", attempts, n_dataset_tasks=5))
    assert figures["pass1"] == pytest.approx(1.5 / 5) and figures["pass1_tasks"] == pytest.approx(1.5)
    assert figures["pass2"] == pytest.approx(2 / 5) and figures["pass2_tasks"] == pytest.approx(2)
    assert (figures["dataset_tasks"], figures["attempted_tasks"], figures["solved_task_ids"]) == (5, 4, ["a", "b"])


def test_folders_scored_before_dropped_tasks_were_recorded_take_the_dataset_size(tmp_path, capsys):
    _folder(tmp_path / "eval-student", {"a": [True, False], "b": [False, False]})  # n_dataset_tasks absent
    _folder(tmp_path / "eval-grpo-only", {"a": [True, True], "b": [False, False]}, n_dataset_tasks=2)
    _folder(tmp_path / "grpo-only", {"a": [True, True]})  # a training run's folder, not an evaluation: ignored
    out = tmp_path / "arc.json"
    assert main([str(tmp_path), "--dataset-tasks", "4", "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert set(figures) == {"student", "grpo-only"}
    assert figures["student"]["pass1"] == pytest.approx(0.5 / 4) and figures["grpo-only"]["pass2"] == 0.25
    assert "pass@1 12.50%" in capsys.readouterr().out
    assert report(tmp_path)["student"]["dataset_tasks"] == 2  # without --dataset-tasks: the attempted ones
    with pytest.raises(ValueError, match="2 tasks attempted but the dataset is given 1"):
        report(tmp_path, dataset_tasks=1)
    with pytest.raises(SystemExit, match="no scored eval"):
        report(tmp_path / "grpo-only")
