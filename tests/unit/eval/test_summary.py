"""What `arc-trl evaluate generate` prints at the end: pass@1/2/k, the Kaggle score (2 voted attempts), the kinds of
the attempts, one row a task on request; and the attempt kinds themselves."""

from __future__ import annotations

import json

import pytest
from eval_folder import write_eval_folder

from arc_trl.eval.error_kinds import attempt_kind, kind_counts
from arc_trl.eval.summary import format_summary, summarise_folder
from arc_trl.tasks import load_tasks


@pytest.mark.parametrize("args, kind", [
    ((True, True, "submitted", True, "NameError"), "solved"),  # an error on the way does not matter once it submits
    ((False, True, "submitted", True, None), "wrong"),
    ((None, True, "submitted", True, None), "submitted"),  # hidden solutions
    ((False, False, "truncated", True, None), "truncated"),
    ((False, False, "budget", True, "SyntaxError"), "truncated"),
    ((False, False, "max_turns", False, None), "no code"),
    ((False, False, "max_turns", True, "SyntaxError"), "syntax"),
    ((False, False, None, True, "syntax"), "syntax"),  # the replay's vocabulary
    ((False, False, "max_turns", True, "cpu_time"), "timeout"),
    ((False, False, None, True, "timeout"), "timeout"),
    ((False, False, "max_turns", True, "memory"), "runtime"),
    ((False, False, "max_turns", True, None), "no submit"),
])
def test_attempt_kind(args, kind):
    assert attempt_kind(*args) == kind


def test_kind_counts_follow_the_kinds_order():
    assert list(kind_counts(["syntax", "wrong", "solved", "wrong"]).items()) == [("solved", 1), ("wrong", 2),
                                                                                ("syntax", 1)]


def test_the_summary_of_an_evaluation_folder(tmp_path):
    tasks = load_tasks("arc-agi-1/eval", ids=["00576224", "009d5c81", "00dbd492", "03560426"])
    folder = write_eval_folder(tmp_path / "eval", tasks)  # tasks 0 and 2 solved by attempt 0; attempt 1: NameError
    summary = summarise_folder(folder)  # the dataset from metrics.json; its 4 tasks are the whole selection
    assert summary.n_tasks == 4 and summary.n_attempts == 8
    assert summary.pass_at == {1: 0.25, 2: 0.5}
    assert summary.kaggle == 0.5 and summary.kaggle_tasks == 4  # attempt 0's grid voted first: 2 of 4 tasks
    assert summary.kinds == {"solved": 2, "wrong": 2, "runtime": 4}
    text = format_summary(summary, per_task=True)
    lines = text.splitlines()
    assert lines[0] == ("4 tasks, 8 attempts; pass@1 25.00% · pass@2 50.00% · Kaggle (2 attempts, voted) 50.00% "
                        "(over the 4 tasks of the dataset)")
    assert lines[1] == ("attempts: solved 2 (25%), wrong 2 (25%); without a valid submission: truncated 0, no code 0, "
                        "syntax 0, timeout 0, runtime 4, no submit 0")
    assert lines[2].split() == ["task", "solved", "attempts", "best", "pixel", "kinds"]
    assert lines[3].split()[:4] == ["00576224", "1/2", "2", "100.00%"] and lines[3].endswith("solved 1, runtime 1")
    assert lines[4].split()[:3] == ["009d5c81", "-", "2"] and lines[4].endswith("wrong 1, runtime 1")


def test_the_kaggle_score_counts_the_tasks_generate_dropped(tmp_path):
    tasks = load_tasks("arc-agi-1/eval", ids=["00576224", "009d5c81", "00dbd492", "03560426"])
    folder = write_eval_folder(tmp_path / "eval", tasks[:2])
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics.update(n_dataset_tasks=3, dropped_task_ids=[tasks[2].id])  # one prompt too long: unattempted, 0
    (folder / "metrics.json").write_text(json.dumps(metrics))
    summary = summarise_folder(folder)
    assert summary.kaggle_tasks == 3 and summary.kaggle == pytest.approx(1 / 3)
