"""`check_transform`: a REPL message that defines `transform(grid)` gets it checked on the training pairs, and its test
outputs submitted when it reproduces every training output (arc_trl/sandbox/transform_check.py)."""

from __future__ import annotations

import pytest

from arc_trl.sandbox import SandboxConfig, SandboxPool

MIRROR = "Here is my solution.\n```python\nimport numpy as np\ndef transform(grid):\n    return np.fliplr(grid)\n```"


@pytest.fixture(scope="module")
def checking_pool():
    with SandboxPool(num_workers=1, config=SandboxConfig(timeout_s=2.0, check_transform=True)) as p:
        yield p


def test_a_transform_that_reproduces_every_training_output_submits_its_test_outputs(checking_pool, toy_task):
    with checking_pool.new_session(toy_task) as session:
        turn = session.run_turn(MIRROR)
    assert turn.submitted == toy_task.test_outputs and session.submitted == toy_task.test_outputs
    assert turn.transform.train_outputs == [p.output for p in toy_task.train]
    assert turn.observation.splitlines() == [
        "transform(grid) checked on the 2 training examples: 2 of 2 outputs match.",
        "- example 1: matches", "- example 2: matches",
        "Every training output matches: transform's outputs for the test inputs are submitted."]


@pytest.mark.parametrize("body, verdicts", [
    ("return grid", ["- example 1: wrong: 4 of 4 cells differ", "- example 2: wrong: 2 of 3 cells differ"]),
    ("return [[0]]", ["- example 1: wrong shape: 1x1, expected 2x2", "- example 2: wrong shape: 1x1, expected 1x3"]),
    ("return np.fliplr(grid) if grid.shape[0] == 2 else 1 / 0",
     ["- example 1: matches", "- example 2: error: error: ZeroDivisionError: division by zero"]),
], ids=["cells", "shape", "error"])
def test_a_transform_that_misses_a_training_output_is_reported_and_nothing_submitted(checking_pool, toy_task, body,
                                                                                       verdicts):
    with checking_pool.new_session(toy_task) as session:
        turn = session.run_turn(f"```python\nimport numpy as np\ndef transform(grid):\n    {body}\n```")
    assert turn.submitted is None and session.submitted is None
    lines = turn.observation.splitlines()
    assert lines[1:3] == verdicts and lines[-1].startswith("Fix transform")


def test_printed_output_comes_first_and_the_check_follows(checking_pool, toy_task):
    with checking_pool.new_session(toy_task) as session:
        turn = session.run_turn(MIRROR.removesuffix("```") + "print(len(train_inputs))\n```")
    assert turn.observation.startswith("2\n") and "2 of 2 outputs match" in turn.observation


def test_no_check_without_a_new_definition_an_explicit_submit_or_the_option(checking_pool, toy_task):
    with checking_pool.new_session(toy_task) as session:
        first = session.run_turn("```python\ndef transform(grid):\n    return grid\n```")
        again = session.run_turn("```python\nprint(transform(train_inputs[0]).shape)\n```")  # defines nothing
        assert first.transform is not None and again.transform is None and again.observation == "(2, 2)"
        submitted = session.run_turn(MIRROR + "\n```python\nSUBMIT([[[0]]])\n```")
        assert submitted.transform is None and submitted.submitted == [[[0]]]  # the model's own SUBMIT wins
    with SandboxPool(num_workers=1, config=SandboxConfig(timeout_s=2.0)) as plain, plain.new_session(toy_task) as s:
        turn = s.run_turn(MIRROR)
        assert turn.transform is None and turn.submitted is None and turn.observation == "(no output)"


def test_a_test_input_without_a_grid_submits_nothing(checking_pool, toy_task):
    code = "```python\nimport numpy as np\ndef transform(grid):\n    assert grid[0][0] != 7, 'seven'\n" \
           "    return np.fliplr(grid)\n```"
    with checking_pool.new_session(toy_task) as session:
        turn = session.run_turn(code)
    assert turn.submitted is None
    assert turn.observation.splitlines()[-1].startswith("But transform gave no grid for test input 1 (error: ")
    assert "seven" in turn.observation


def test_a_task_without_training_pairs_is_never_submitted_by_the_check():
    from arc_trl.sandbox.results import ProgramResult
    from arc_trl.sandbox.transform_check import transform_verdict

    program = ProgramResult(compiled=True, test_outputs=[[[1]]], test_errors=[None])
    submitted, text = transform_verdict(program, [])
    assert submitted is None and "no training examples" in text
