"""arc_agi_report: real-ARC pass@k over the whole dataset, unattempted tasks counted as failures."""

from __future__ import annotations

import json

import pytest

from arc_experiments.learning.arc_agi_report import main, model_figures, report


def _folder(path, attempts, **metrics):
    """A scored generate folder from {task id: [passed per attempt]} (per_attempt.jsonl as `score` writes it)."""
    path.mkdir(parents=True)
    rows = [{"task_id": t, "attempt": i, "passed": p} for t, ps in attempts.items() for i, p in enumerate(ps)]
    (path / "per_attempt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "metrics.json").write_text(json.dumps({"dataset": "arc-agi-1/eval", "valid_outputs": 0.9, **metrics}))
    return path


def test_unattempted_tasks_count_as_failures(tmp_path):
    # 4 attempted tasks of 5 (one prompt was too long): a solved twice, b once (second attempt), c and d never
    attempts = {"a": [True, True], "b": [False, True], "c": [False, False], "d": [False, False]}
    folder = _folder(tmp_path / "eval-x", attempts, n_dataset_tasks=5, n_dropped_tasks=1)
    figures = model_figures(folder)
    # pass@1 per task = c/n: a 1, b 1/2; pass@2 per task = 1 if any passed: a, b
    assert figures["pass1"] == pytest.approx(1.5 / 5) and figures["pass1_tasks"] == pytest.approx(1.5)
    assert figures["pass2"] == pytest.approx(2 / 5) and figures["pass2_tasks"] == pytest.approx(2)
    assert (figures["dataset_tasks"], figures["attempted_tasks"], figures["solved_task_ids"]) == (5, 4, ["a", "b"])


def test_uneven_attempts_and_augmented_ids(tmp_path):
    # b has one attempt: k stops at 1 (pass@2 of b cannot be drawn); an augmented attempt counts for its original id
    rows = [{"task_id": "a", "attempt": 0, "passed": True}, {"task_id": "a|d1", "attempt": 1, "passed": False},
            {"task_id": "b", "attempt": 0, "passed": False}, {"task_id": "b", "attempt": 1, "passed": None}]
    folder = tmp_path / "eval-x"
    folder.mkdir()
    (folder / "per_attempt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "metrics.json").write_text(json.dumps({"n_dataset_tasks": 4, "n_dropped_tasks": 0}))
    figures = model_figures(folder)
    assert figures["pass1"] == pytest.approx(0.5 / 4) and "pass2" not in figures  # b: one scored attempt
    assert figures["solved_task_ids"] == ["a"] and figures["attempted_tasks"] == 2


def test_folders_scored_before_dropped_tasks_were_recorded_need_the_dataset_size(tmp_path, capsys):
    _folder(tmp_path / "eval-student", {"a": [True, False], "b": [False, False]}, n_dataset_tasks=2)
    _folder(tmp_path / "eval-grpo-only", {"a": [True, True], "b": [False, False]}, n_dataset_tasks=2)
    _folder(tmp_path / "grpo-only", {"a": [True, True]})  # a training run's folder, not an evaluation: ignored
    with pytest.raises(ValueError, match="does not record dropped tasks.*--dataset-tasks"):
        report(tmp_path)  # its n_dataset_tasks (2) counts only the attempted tasks
    out = tmp_path / "arc.json"
    assert main([str(tmp_path), "--dataset-tasks", "4", "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert set(figures) == {"student", "grpo-only"}
    assert figures["student"]["pass1"] == pytest.approx(0.5 / 4) and figures["grpo-only"]["pass2"] == 0.25
    assert "pass@1 12.50%" in capsys.readouterr().out
    with pytest.raises(ValueError, match="2 tasks attempted but the dataset is given 1"):
        report(tmp_path, dataset_tasks=1)
    with pytest.raises(SystemExit, match="no scored eval"):
        report(tmp_path / "grpo-only")
