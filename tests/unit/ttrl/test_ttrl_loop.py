"""The per-task loop without a model (a scripted runner, an injected clock): the per-task and total budgets are
kept, a rerun after a kill skips finished tasks and redoes the half-finished one, and submission.json is valid with
two attempts per test input, placeholders (named) for the tasks without attempts."""

from __future__ import annotations

import json

import pytest
from ttrl_helpers import FakeClock

from arc_trl.data.task import ArcTask, Pair
from arc_trl.eval.submission import submission_problems
from arc_trl.ttrl.budget import Budget
from arc_trl.ttrl.loop import run_tasks
from arc_trl.ttrl.submission import score_written, write_ttrl_submission
from arc_trl.ttrl.task_folder import TaskFolder


def tasks(n: int = 3) -> list[ArcTask]:
    """n Kaggle-style tasks (no test outputs); task i has i + 1 test inputs."""
    return [ArcTask(f"t{i}", [Pair([[1]], [[2]]), Pair([[3]], [[4]])], [[[i]]] * (i + 1)) for i in range(n)]


class ScriptedRunner:
    """Each task: `seconds` of (fake) training, then two attempts predicting [[9]] for every test input."""

    def __init__(self, clock: FakeClock, seconds: float = 10.0, kill_at: str | None = None) -> None:
        self.clock, self.seconds, self.kill_at = clock, seconds, kill_at
        self.calls: list[tuple[str, float | None]] = []

    def __call__(self, task, folder, train_seconds):
        self.calls.append((task.id, train_seconds))
        with open(folder.completions, "a") as out:
            out.write(json.dumps({"task_id": task.id, "attempt": 0, "completion": "",
                                  "outcome": {"test_predictions": [[[9]]] * len(task.test_inputs)}}) + "\n")
            if task.id == self.kill_at:
                raise KeyboardInterrupt  # killed between its two attempts
            out.write(json.dumps({"task_id": task.id, "attempt": 1, "completion": "",
                                  "outcome": {"test_predictions": [[[9]]] * len(task.test_inputs)}}) + "\n")
        self.clock.advance(self.seconds)
        return {"adapted": True, "steps": 1, "n_attempts": 2}


def test_the_per_task_budget_is_cut_to_what_the_total_has_left(fake_clock):
    budget = Budget(task_seconds=30, total_seconds=100, reserve_seconds=10, clock=fake_clock)
    budget.begin()
    assert budget.allowance().train_seconds == 30
    fake_clock.advance(70)
    assert budget.allowance().start and budget.allowance().train_seconds == 20  # 100 - 10 reserve - 70 spent
    fake_clock.advance(20)
    allowance = budget.allowance()
    assert not allowance.start and "total budget spent" in allowance.reason
    assert Budget(clock=fake_clock).allowance().train_seconds is None  # no caps at all


def test_a_task_is_not_started_past_the_total_budget_and_the_submission_has_placeholders(tmp_path, fake_clock):
    runner = ScriptedRunner(fake_clock, seconds=45)
    budget = Budget(task_seconds=60, total_seconds=100, reserve_seconds=10, clock=fake_clock)
    budget.begin()
    report = run_tasks(tasks(), tmp_path, runner, budget, log=lambda line: None)
    assert runner.calls == [("t0", 60), ("t1", 45)]  # t1 gets the 45 s left; after 90 s, t2 is not started
    assert report.ran == ["t0", "t1"] and report.not_started == ["t2"]
    summary = write_ttrl_submission(tmp_path, tasks(), fallback="zero")
    submission = json.loads((tmp_path / "submission.json").read_text())
    assert submission_problems(submission, {t.id: t for t in tasks()}) == []
    assert [len(submission[t]) for t in ("t0", "t1", "t2")] == [1, 2, 3]  # one entry per test input
    assert all(set(entry) == {"attempt_1", "attempt_2"} for entries in submission.values() for entry in entries)
    assert submission["t1"][1]["attempt_1"] == [[9]] and submission["t1"][1]["attempt_2"] == [[0]]  # one distinct
    assert submission["t2"] == [{"attempt_1": [[0]], "attempt_2": [[0]]}] * 3  # placeholders
    assert summary["tasks_without_attempts"] == ["t2"] and summary["n_test_inputs"] == 6


def test_a_rerun_after_a_kill_skips_finished_tasks_and_redoes_the_half_finished_one(tmp_path, fake_clock):
    with pytest.raises(KeyboardInterrupt):
        run_tasks(tasks(), tmp_path, ScriptedRunner(fake_clock, kill_at="t1"), Budget(clock=fake_clock),
                  log=lambda line: None)
    assert TaskFolder(tmp_path, "t0").done and not TaskFolder(tmp_path, "t1").done
    assert TaskFolder(tmp_path, "t1").attempts() == []  # a half-finished task's attempts are not voted
    runner = ScriptedRunner(fake_clock)
    report = run_tasks(tasks(), tmp_path, runner, Budget(clock=fake_clock), log=lambda line: None)
    assert [task for task, _ in runner.calls] == ["t1", "t2"] and report.skipped_done == ["t0"]
    assert [r["attempt"] for r in TaskFolder(tmp_path, "t1").attempts()] == [0, 1]  # redone from an empty folder
    summary = write_ttrl_submission(tmp_path, tasks())
    assert summary["tasks_without_attempts"] == []


def test_the_score_reads_the_written_file_against_solutions_given_only_then(tmp_path, fake_clock):
    run_tasks(tasks(2), tmp_path, ScriptedRunner(fake_clock), Budget(clock=fake_clock), log=lambda line: None)
    summary = write_ttrl_submission(tmp_path, tasks(2))
    solved = [ArcTask(t.id, t.train, t.test_inputs, [[[9]]] * len(t.test_inputs)) for t in tasks(2)]
    solved[1].test_outputs[1] = [[5]]
    result = score_written(summary["submission"], solved)
    assert result["n_correct"] == 2 and result["n_test_inputs"] == 3 and result["score"] == pytest.approx(0.75)
    assert score_written(summary["submission"], tasks(2)) is None  # no solutions: nothing to score


def test_task_ids_become_safe_folder_names(tmp_path):
    assert TaskFolder(tmp_path, "../evil/id").path.parent == tmp_path / "tasks"
    assert TaskFolder(tmp_path, "..").path.name not in ("..", ".")
