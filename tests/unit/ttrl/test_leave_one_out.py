"""Leave-one-out construction: n training pairs give n episodes' prompts, each without its held-out pair; a task
with one training pair gives none (and is attempted unadapted, tests/unit/ttrl/test_ttrl_loop.py)."""

from __future__ import annotations

from ttrl_helpers import INPUTS, OUTPUTS, grid_texts, run_context

from arc_trl.data.task import ArcTask, Pair
from arc_trl.ttrl.adapt import AdaptingRunner
from arc_trl.ttrl.leave_one_out import can_leave_one_out, leave_one_out_tasks, tile_rows


def test_n_pairs_give_n_tasks_each_holding_out_one_pair_as_its_test(leak_task):
    derived = leave_one_out_tasks(leak_task)
    assert [t.id for t in derived] == ["leak0001:heldout-0", "leak0001:heldout-1", "leak0001:heldout-2"]
    for k, task in enumerate(derived):
        assert task.test_inputs == [INPUTS[k]] and task.test_outputs == [OUTPUTS[k]]
        assert [p.input for p in task.train] == [g for i, g in enumerate(INPUTS) if i != k]
        assert [p.output for p in task.train] == [g for i, g in enumerate(OUTPUTS) if i != k]
        assert leak_task.test_inputs[0] not in task.test_inputs  # the real test input is not played
        assert "reference_program" not in task.metadata


def test_a_single_pair_task_cannot_be_left_one_out(toy_task_two_tests):
    assert not can_leave_one_out(toy_task_two_tests) and leave_one_out_tasks(toy_task_two_tests) == []
    assert can_leave_one_out(ArcTask("two", [Pair([[1]], [[2]]), Pair([[3]], [[4]])], [[[5]]]))


def test_the_dataset_has_one_prompt_per_pair_none_showing_its_held_out_output(leak_task, tiny_tokenizer):
    runner = AdaptingRunner(run_context(tiny_tokenizer))
    rows = runner.rows(leave_one_out_tasks(leak_task), augment=True)
    assert len(rows) == 3 and "teacher_prompt" not in rows[0]
    for k, row in enumerate(rows):
        user = row["prompt"][1]["content"]
        assert "2 training examples and 1 test input" in user
        assert not any(text in user for text in grid_texts(OUTPUTS[k]))
        assert all(grid_texts(OUTPUTS[i])[0] in user for i in range(3) if i != k)  # the other pairs are shown
        assert grid_texts(INPUTS[k])[0] in user.split("Test input 1")[1]  # its input is the test input


def test_augment_copies_multiply_the_prompts_and_keep_each_id(leak_task, tiny_tokenizer):
    runner = AdaptingRunner(run_context(tiny_tokenizer, script={"augment": True, "augment_copies": 2}))
    rows = runner.rows(leave_one_out_tasks(leak_task), augment=True)
    assert len(rows) == 6
    assert {row["task_id"].split("|")[0] for row in rows} == {f"leak0001:heldout-{k}" for k in range(3)}


def test_rows_are_tiled_to_fill_a_generation_batch():
    assert tile_rows([{"a": 1}, {"a": 2}], 5) == [{"a": 1}, {"a": 2}, {"a": 1}, {"a": 2}, {"a": 1}]
    assert tile_rows([{"a": 1}] * 3, 2) == [{"a": 1}] * 3 and tile_rows([], 4) == []
