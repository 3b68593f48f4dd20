"""SFT warm-start data: chunked, pool-parallel replay gives exactly the per-task reference conversations."""

from __future__ import annotations

from arc_trl.sandbox import SandboxPool
from arc_trl.sft_data import build_sft_dataset, reference_conversation
from arc_trl.synthetic import generate_task


def test_parallel_replay_equals_one_task_at_a_time():
    tasks = [generate_task(family, seed, "tiny") for seed in range(2) for family in ("flip", "rotate", "transpose")]
    broken = generate_task("flip", 5, "tiny")
    broken.metadata["reference_program"] = "def transform(grid):\n    return grid\n"  # submits a wrong grid
    tasks.insert(3, broken)
    with SandboxPool(num_workers=2) as pool:
        dataset, report = build_sft_dataset(tasks, "repl", pool, chunk_size=4)
        expected = []
        for task in tasks:
            session = pool.new_session(task)
            try:
                expected.append(reference_conversation(task, "repl", session))
            finally:
                session.close()
    assert report.kept == 6 and report.dropped_ids == [broken.id]
    assert dataset["messages"] == [c for c in expected if c is not None]
    assert dataset["task_id"] == [t.id for t in tasks if t is not broken]


def test_privileged_rows_show_the_reference_program_and_student_rows_do_not():
    from arc_trl.data.dataset import build_dataset

    tasks = [generate_task(family, 7, "tiny") for family in ("flip", "rotate", "mirror_concat")]
    with SandboxPool(num_workers=2) as pool:
        student, _ = build_sft_dataset(tasks, "repl", pool)
        teacher, report = build_sft_dataset(tasks, "repl", pool, privileged="program")
    assert report.kept == len(tasks)
    for task, s_row, t_row in zip(tasks, student["messages"], teacher["messages"], strict=True):
        program = task.metadata["reference_program"].strip()
        s_user, t_user = s_row[1]["content"], t_row[1]["content"]
        assert program not in s_user and "A reference program that solves this task" not in s_user
        assert program in t_user and t_user.startswith(s_user)  # the student prompt, the privileged block appended
        assert s_row[0] == t_row[0] and s_row[2:] == t_row[2:]  # same system prompt, same reference episode
    # the privileged teacher is trained on exactly the prompt OPD shows it (train.py: teacher_privileged: program)
    rl = build_dataset(tasks, "repl", privileged="program")
    assert [m[:2] for m in teacher["messages"]] == rl["teacher_prompt"]


def test_privileged_solutions_and_program_mode():
    import pytest

    from arc_trl.data.grid_format import format_grid

    task = generate_task("transpose", 3, "tiny")
    (row,) = build_sft_dataset([task], "program", privileged="solutions")[0]["messages"]
    assert format_grid(task.test_outputs[0]) in row[1]["content"].split("Privileged information")[1]
    with pytest.raises(ValueError, match="privileged must be one of none, program, solutions"):
        build_sft_dataset([task], "program", privileged="both")
