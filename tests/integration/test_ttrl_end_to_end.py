"""`arc-trl ttrl` end to end on CPU: a Kaggle challenges file of 2 tiny tasks, the tiny model, configs/ttrl-tiny-cpu.yaml
(1 GRPO step per task, LoRA, transformers generation): a submission.json the project's validator accepts, scored
after it is written; a rerun skips both finished tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arc_trl.cli.ttrl import run
from arc_trl.eval.submission import validate_main

ROOT = Path(__file__).resolve().parents[2]
CHALLENGES = {
    "aa000001": {"train": [{"input": [[1, 2], [3, 4]], "output": [[2, 1], [4, 3]]},
                           {"input": [[5, 0, 6]], "output": [[6, 0, 5]]}],
                 "test": [{"input": [[7, 8], [9, 0]]}]},
    "bb000002": {"train": [{"input": [[1, 0], [0, 1]], "output": [[0, 1], [1, 0]]},
                           {"input": [[2, 2, 0]], "output": [[0, 2, 2]]},
                           {"input": [[3]], "output": [[3]]}],
                 "test": [{"input": [[4, 0]]}, {"input": [[5]]}]},
}
SOLUTIONS = {"aa000001": [[[8, 7], [0, 9]]], "bb000002": [[[0, 4]], [[5]]]}


@pytest.mark.slow
def test_two_tiny_tasks_one_step_each_to_a_valid_scored_submission(tiny_model_dir, tmp_path, capsys):
    challenges = tmp_path / "tiny_challenges.json"
    challenges.write_text(json.dumps(CHALLENGES))
    (tmp_path / "tiny_solutions.json").write_text(json.dumps(SOLUTIONS))  # read by --score alone, afterwards
    out = tmp_path / "out"
    argv = ["--config", str(ROOT / "configs" / "ttrl-tiny-cpu.yaml"), "--model_name_or_path", str(tiny_model_dir),
            "--dataset", str(challenges), "--output_dir", str(out), "--score", "true"]
    summary = run(argv)
    assert summary["ran"] == ["aa000001", "bb000002"] and summary["not_adapted"] == {}
    for task_id in CHALLENGES:
        record = json.loads((out / "tasks" / task_id / "done.json").read_text())
        assert record["adapted"] and record["steps"] == 1 and record["n_attempts"] == 2
    assert validate_main(["--submission", str(out / "submission.json"), "--challenges", str(challenges)]) == 0
    submission = json.loads((out / "submission.json").read_text())
    assert [len(submission[t]) for t in CHALLENGES] == [1, 2]
    assert summary["score"]["n_test_inputs"] == 3 and 0.0 <= summary["score"]["score"] <= 1.0
    assert json.loads((out / "ttrl_summary.json").read_text())["ran"] == summary["ran"]
    assert "[ttrl] wrote" in capsys.readouterr().out
    again = run(argv)  # resume: both tasks finished, nothing redone, the same submission
    assert again["ran"] == [] and again["skipped_done"] == ["aa000001", "bb000002"]
    assert json.loads((out / "submission.json").read_text()) == submission
