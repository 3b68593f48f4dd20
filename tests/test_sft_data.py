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
