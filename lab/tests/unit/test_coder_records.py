"""arc_experiments/coder/records.py: the committed slim per-attempt files (grids replaced by their sha256) give back
exactly the metrics `arc-trl evaluate score` wrote from the full ones; solved attempts keep their completions."""

from __future__ import annotations

import json

import pytest

from arc_experiments.coder.plan import ARMS, choose_arm, validation_ids
from arc_experiments.coder.records import TABLE, folder_figures, slim
from arc_trl.data import render_messages
from arc_trl.data.task import ArcTask, Pair
from arc_trl.eval.score import score_completions, write_outputs
from arc_trl.sandbox import SandboxConfig, SandboxPool

MIRROR = "```python\nimport numpy as np\ndef transform(grid):\n    return np.fliplr(grid)\n```"
FLIP = "```python\nimport numpy as np\ndef transform(grid):\n    return np.flipud(grid)\n```"
IDENTITY = "```python\ndef transform(grid):\n    return grid\n```"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A machine's WORK folder with two scored evaluation folders (two tasks, mixed attempts)."""
    work = tmp_path_factory.mktemp("work")
    tasks = [ArcTask("mirror", [Pair([[1, 2], [3, 4]], [[2, 1], [4, 3]])], [[[7, 8], [9, 0]]], [[[8, 7], [0, 9]]]),
             ArcTask("same", [Pair([[1, 2]], [[1, 2]]), Pair([[3]], [[3]])], [[[5, 6]]], [[[5, 6]]])]
    attempts = {"harness/qwen05/coder-spaced": [MIRROR, FLIP, MIRROR, IDENTITY, "no code here"],
                "zero-shot/qwen05/train": [FLIP, FLIP, "```python\nprint(1/0)\n```", IDENTITY]}
    with SandboxPool(num_workers=2, config=SandboxConfig(timeout_s=2.0)) as pool:
        for name, texts in attempts.items():
            folder = work / name
            folder.mkdir(parents=True)
            records = [{"task_id": task.id, "attempt": k, "completion": text, "line": 1 + k + 10 * t,
                        "messages": render_messages(task, "repl") + [{"role": "assistant", "content": text}]}
                       for t, task in enumerate(tasks) for k, text in enumerate(texts)]
            (folder / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            metrics, rows = score_completions(tasks, records, 2, pool.config, mode="auto", where=name, progress=False)
            write_outputs(folder, metrics, rows)
            (folder / "sampling.json").write_text(json.dumps({"runs": [{"model_tokens_per_s": 10.0}]}))
    (work / "choice.json").write_text(json.dumps({"chosen": "coder-spaced"}))
    return work


def test_slim_records_give_back_the_metrics_evaluate_score_wrote(work, tmp_path):
    written = slim(work, tmp_path / "coder")
    assert sorted(str(p.relative_to(tmp_path / "coder")) for p in written) == [
        "harness/qwen05/coder-spaced", "zero-shot/qwen05/train"]
    for target in written:
        original = json.loads((work / target.relative_to(tmp_path / "coder") / "metrics.json").read_text())
        figures = folder_figures(target)
        assert {k: figures[k] for k in TABLE} == pytest.approx({k: original[k] for k in TABLE}, abs=1e-12)
        assert figures["n_attempts"] == original["n_attempts"]
    harness = folder_figures(tmp_path / "coder" / "harness" / "qwen05" / "coder-spaced")
    assert harness["solved_tasks"] == ["mirror", "same"] and harness["unique_outputs"] == pytest.approx(
        (3 / 5 + 2 / 5) / 2)  # mirror: fliplr, flipud, identity; same: [[6, 5]] and [[5, 6]]
    assert harness["pass_at_k"]["1"] == pytest.approx((2 / 5 + 2 / 5) / 2)  # flipud and identity solve "same"
    assert harness["errors"] == {"no_code": 2, "wrong_output": 4}
    solved = (tmp_path / "coder" / "harness" / "qwen05" / "coder-spaced" / "solved.jsonl").read_text().splitlines()
    assert sorted((json.loads(s)["task_id"], json.loads(s)["attempt"]) for s in solved) == [
        ("mirror", 0), ("mirror", 2), ("same", 1), ("same", 3)]
    assert (tmp_path / "coder" / "choice.json").exists()


def test_the_choice_rule_and_the_validation_tasks_are_fixed():
    ids = [f"{i:08x}" for i in range(400)]
    assert validation_ids(ids) == validation_ids(list(reversed(ids))) and len(set(validation_ids(ids))) == 100
    metrics = {name: {"is_correct": 0.0, "pass_rate": 0.0, "valid_outputs": 0.0} for name in ARMS}
    assert choose_arm(metrics) == "default"  # a tie keeps the default
    metrics["coder-spaced"]["valid_outputs"] = 0.2
    metrics["program-spaced"]["valid_outputs"] = 0.3
    assert choose_arm(metrics) == "program-spaced"
    metrics["coder-spaced"]["is_correct"] = 0.01
    assert choose_arm(metrics) == "coder-spaced"


def slim_folder(path, key: str, rows: list[tuple[str, bool]]):
    """A committed folder's per_attempt.jsonl.gz with one field per attempt: (task_id, value) rows."""
    import gzip

    path.mkdir()
    with gzip.open(path / "per_attempt.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"task_id": t, key: v}) + "\n" for t, v in rows)
    return path


def test_a_paired_difference_is_over_the_tasks_both_folders_attempted(tmp_path):
    from arc_experiments.coder.records import paired_difference

    a = slim_folder(tmp_path / "a", "valid_outputs", [("t1", False), ("t1", False), ("t2", True), ("t2", False),
                                                      ("t3", True)])
    b = slim_folder(tmp_path / "b", "valid_outputs", [("t1", True), ("t1", False), ("t2", True), ("t2", True),
                                                      ("t4", True)])
    figures = paired_difference(a, b, "valid_outputs")
    # t1: 0.5 - 0, t2: 1 - 0.5 (t3, t4 unpaired): mean 0.5, standard deviation 0: the interval is the point
    assert figures == {"tasks": 2, "mean": 0.5, "ci95": [0.5, 0.5]}


def test_each_machines_timeline_is_kept_when_the_next_ones_records_are_slimmed(work, tmp_path):
    """A session's machine brings back only its own timeline: the committed one (the GPU seconds of the earlier
    figures) keeps its lines and gets the new ones after them, once."""
    out = tmp_path / "coder"
    out.mkdir()
    (out / "timeline.jsonl").write_text('{"stage": "harness-qwen05", "seconds": 1}\n')
    (work / "timeline.jsonl").write_text('{"stage": "zero-shot-qwen05", "seconds": 2}\n')
    try:
        slim(work, out)
        slim(work, out)  # slimming the same records again adds nothing
    finally:
        (work / "timeline.jsonl").unlink()
    assert [json.loads(x)["stage"] for x in (out / "timeline.jsonl").read_text().splitlines()] == [
        "harness-qwen05", "zero-shot-qwen05"]


def test_solved_tasks_of_two_folders_are_counted_alone_and_together(tmp_path):
    """The 1.5B-vs-0.5B gap names tasks, not attempts: a task counts once however many of its attempts passed."""
    from arc_experiments.coder.records import solved_overlap

    small = slim_folder(tmp_path / "small", "passed", [("t1", True), ("t1", True), ("t2", True), ("t3", False)])
    big = slim_folder(tmp_path / "big", "passed", [("t1", False), ("t1", True), ("t3", True), ("t3", True),
                                                   ("t4", True), ("t5", False)])
    assert solved_overlap(small, big) == {"first_only": 1, "second_only": 2, "both": 1}


def test_a_grpo_runs_steps_give_the_gap_at_step_1_and_the_steps_parts(tmp_path):
    """slim_runs keeps each logged step's figures (not the trainer's whole state) and leaves a hand-made stand-in out;
    run_figures reads the student-teacher gap at step 1 and the step's parts from them."""
    from arc_experiments.coder.runs import run_figures, slim_runs

    work = tmp_path / "work"
    history = [{"step": s, "reward": r, "teacher_kl": kl, "rewards/valid_outputs/mean": v, "time/step": 10.0 * s,
                "time/generate": 4.0 * s, "time/train": 5.0 * s, "tokens/generated": 400.0, "tokens/trained": 1000.0,
                "collapse_guard/level": 0, "grad_norm": 1.0}
               for s, r, kl, v in ((1, -0.5, 0.31, 0.25), (2, 0.5, 0.21, 0.5))] + [{"train_runtime": 30.0, "step": 2}]
    run = work / "grpo" / "grpo-opd-s0"
    run.mkdir(parents=True)
    (run / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (run / "run_summary.json").write_text("{}")
    (run / "arc_trl_config.json").write_text(json.dumps({"arc": {"teacher_tau": 0.1, "adv_tau": 1.0,
                                                                 "max_train_seconds": 600}}))
    stand_in = work / "grpo" / "grpo-s0"
    stand_in.mkdir(parents=True)
    (stand_in / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    (stand_in / "run_summary.json").write_text(json.dumps({"placeholder": "skipped by hand"}))
    written = slim_runs(work, tmp_path / "coder")
    assert [p.name for p in written] == ["grpo-opd-s0"]
    steps = [json.loads(x) for x in (written[0] / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and "grad_norm" not in steps[0]  # logged steps, their chosen keys
    figures = run_figures(written[0])
    assert figures["teacher_kl_step1"] == 0.31 and figures["teacher_kl_last"] == 0.21 and figures["steps"] == 2
    assert figures["reward_first"] == -0.5 and figures["valid_outputs_last"] == 0.5
    assert figures["step_s"]["step"] == 15.0 and figures["step_s"]["generate"] == 6.0
    assert figures["generated_tokens_per_s"] == round(800 / 12.0, 1) and figures["trained_tokens_per_s"] == round(2000 / 15.0, 1)
    assert figures["teacher_tau"] == 0.1 and figures["max_train_seconds"] == 600 and figures["collapse_levels"] == [0]


def test_a_sessions_runs_are_paired_with_its_own_warm_baseline_by_task(work, tmp_path):
    """results/coder/sessions/S/grpo/RUN/eval minus sessions/S/warm/qwen05/eval, task by task (the warm start
    differs from session to session: a run is compared with the one it started from). The fixture's two scored
    folders stand for them: the zero-shot one as the warm baseline, the harness one as the run's evaluation."""
    import shutil

    from arc_experiments.coder.records import summary

    slimmed = tmp_path / "slim"
    slim(work, slimmed)
    session = tmp_path / "results" / "coder" / "sessions" / "7"
    run = session / "grpo" / "grpo-opd-s0"
    shutil.copytree(slimmed / "zero-shot" / "qwen05" / "train", session / "warm" / "qwen05" / "eval")
    shutil.copytree(slimmed / "harness" / "qwen05" / "coder-spaced", run / "eval")
    (run / "steps.jsonl").write_text(json.dumps({"step": 1, "reward": 0.0, "teacher_kl": 0.2}) + "\n")
    out = summary(tmp_path)
    assert list(out["grpo"]) == ["sessions/7/grpo/grpo-opd-s0"] and out["grpo"]["sessions/7/grpo/grpo-opd-s0"][
        "teacher_kl_step1"] == 0.2
    pair = out["grpo_vs_warm"]["sessions/7/grpo/grpo-opd-s0/eval"]
    # mirror: 0/4 -> 2/5 solved attempts, same: 3/4 -> 2/5
    assert pair["passed"]["tasks"] == 2 and pair["passed"]["mean"] == pytest.approx((0.4 + (0.4 - 0.75)) / 2)
    assert pair["solved_tasks"] == {"first_only": 0, "second_only": 1, "both": 1}
