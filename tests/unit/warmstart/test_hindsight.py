"""Hindsight relabelling (arc_trl/warmstart/hindsight.py): a program's outputs on a task's inputs define the task it
solves; programs that teach nothing are refused with their reason."""

from __future__ import annotations

from arc_trl.warmstart.hindsight import relabel


def test_the_relabelled_task_has_the_programs_outputs_and_the_same_inputs(toy_task):
    flipped_train = [[[3, 4], [1, 2]], [[5, 0, 6]]]
    flipped_test = [[[9, 0], [7, 8]]]
    task, reason = relabel(toy_task, flipped_train, flipped_test, "h3")
    assert reason is None and task.id == "toy_mirror~h3" and task.metadata == {"hindsight_of": "toy_mirror"}
    assert [p.input for p in task.train] == [p.input for p in toy_task.train]
    assert [p.output for p in task.train] == flipped_train and task.test_outputs == flipped_test
    assert task.test_inputs == toy_task.test_inputs


def test_programs_that_teach_nothing_are_refused_with_their_reason(toy_task):
    inputs = [p.input for p in toy_task.train]
    assert relabel(toy_task, inputs, toy_task.test_inputs, "h") == (None, "identity")
    assert relabel(toy_task, [[[1]], [[1]]], [[[1]]], "h") == (None, "constant")
    assert relabel(toy_task, [[[1]], None], [[[1]]], "h") == (None, "missing_output")
    assert relabel(toy_task, [[[1]], [[2]]], None, "h") == (None, "missing_output")
    assert relabel(toy_task, [[[1]], [[2, 10]]], [[[1]]], "h") == (None, "missing_output")  # colour 10: no grid
    assert relabel(toy_task, [[[1]]], [[[1]]], "h") == (None, "missing_output")  # one output short
