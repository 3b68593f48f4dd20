"""`arc-trl transcripts` (arc_trl/warmstart/transcripts.py): solved episodes as played, hindsight rows replayed on
their relabelled task, everything unusable counted by reason, the original test outputs never in a hindsight row."""

from __future__ import annotations

import json

import pytest

from arc_trl.data import render_messages
from arc_trl.eval.score import score_completions, write_outputs
from arc_trl.sandbox import SandboxConfig, SandboxPool
from arc_trl.warmstart.transcripts import TranscriptError, build_transcripts, read_transcripts, write_transcripts

MIRROR = "```python\nimport numpy as np\ndef transform(grid):\n    return np.fliplr(grid)\n```"
FLIP = "The rows reverse.\n```python\nimport numpy as np\ndef transform(grid):\n    return np.flipud(grid)\n```"
ATTEMPTS = [
    MIRROR,  # 0 solved
    "```python\ndef transform(grid):\n    return grid\n```",  # 1 identity
    FLIP,  # 2 hindsight
    "```python\nimport numpy as np\ndef transform(grid):\n    return np.random.randint(0, 9, (3, 3))\n```",  # 3 random
    "```python\nimport numpy as np\ndef transform(grid):\n    return np.array(train_outputs[0])\n```",  # 4 constant
    FLIP.replace("The rows reverse.", "Again."),  # 5 the same outputs as 2
    "```python\nSUBMIT([[[1]]])\n```",  # 6 an explicit, wrong SUBMIT: no transform to relabel
    "```python\nimport numpy as np\nprint(train_inputs[0])\n```\n```python\ndef transform(grid):\n"
    "    return np.rot90(grid, 2)\n```",  # 7 two blocks: one code turn
]


@pytest.fixture(scope="module")
def plain_pool():
    with SandboxPool(num_workers=2, config=SandboxConfig(timeout_s=2.0)) as p:
        yield p


@pytest.fixture
def eval_dir(tmp_path, toy_task, plain_pool):
    """An `evaluate generate` folder, scored: one line per attempt with its messages."""
    return scored_folder(tmp_path / "zero-shot", toy_task, ATTEMPTS, plain_pool)


def scored_folder(folder, toy_task, attempts, plain_pool):
    folder.mkdir()
    prompt = render_messages(toy_task, "repl")
    records = [{"task_id": toy_task.id, "attempt": i, "completion": text, "augmentation": "",
                "messages": prompt + [{"role": "assistant", "content": text}]} for i, text in enumerate(attempts)]
    (folder / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    lined = [{**r, "line": n} for n, r in enumerate(records, start=1)]
    metrics, rows = score_completions([toy_task], lined, 2, plain_pool.config, mode="auto", where="test",
                                      progress=False)
    write_outputs(folder, metrics, rows)
    return folder


def test_solved_and_hindsight_rows_with_every_other_attempt_counted_by_reason(eval_dir, toy_task, plain_pool):
    rows, report = build_transcripts([eval_dir], [toy_task], "repl", None, plain_pool)
    assert [(r["kind"], r["source"].split("/")[-1]) for r in rows] == [("solved", "0"), ("hindsight", "2"),
                                                                      ("hindsight", "7")]
    assert report.summary() == {"kept": {"solved": 1, "hindsight": 2},
                                "skipped": {"constant": 1, "identity": 1, "no_transform": 1, "not_reproduced": 1,
                                            "repeat": 1},
                                "tasks": {"solved": 1, "hindsight": 1}}
    solved, flipped, rotated = rows
    assert solved["messages"] == render_messages(toy_task, "repl") + [{"role": "assistant", "content": MIRROR}]
    user = flipped["messages"][1]["content"]
    assert "Output (2x2):\n34\n12" in user  # the program's output is the relabelled task's
    assert "87\n09" not in user and "90\n78" not in user  # neither the true nor the relabelled test output
    assert flipped["messages"][-1] == {"role": "assistant", "content": "```python\nimport numpy as np\n"
                                       "def transform(grid):\n    return np.flipud(grid)\n```"}
    assert rotated["messages"][-1]["content"].count("```") == 2  # both blocks in one


def test_rows_render_with_the_given_template_and_round_trip(eval_dir, toy_task, plain_pool, tmp_path):
    from arc_trl.data import load_template

    template = load_template("configs/prompts/coder-repl.yaml", "repl")
    rows, _ = build_transcripts([eval_dir], [toy_task], "repl", template, plain_pool, kinds=("hindsight",),
                                max_per_task=1)
    assert len(rows) == 1 and rows[0]["messages"][0]["content"] == template.system
    assert "Output (2x2):\n3 4\n1 2" in rows[0]["messages"][1]["content"]
    path = write_transcripts(rows, tmp_path / "t.jsonl")
    assert read_transcripts([path]) == [{"messages": rows[0]["messages"], "task_id": "toy_mirror",
                                         "kind": "hindsight"}]


def test_held_out_tasks_never_reach_a_row(eval_dir, toy_task, plain_pool):
    rows, report = build_transcripts([eval_dir], [toy_task], "repl", None, plain_pool, skip_ids=frozenset({"toy_mirror"}))
    assert rows == [] and report.summary()["skipped"] == {"held_out": len(ATTEMPTS)}


def test_bad_inputs_are_refused_naming_them(eval_dir, toy_task, plain_pool, tmp_path, toy_task_two_tests):
    with pytest.raises(TranscriptError, match="task 'toy_mirror' is not in the dataset given"):
        build_transcripts([eval_dir], [toy_task_two_tests], "repl", None, plain_pool)
    with pytest.raises(TranscriptError, match=r"per_attempt\.jsonl: no such file"):
        build_transcripts([tmp_path], [toy_task], "repl", None, plain_pool)
    with SandboxPool(num_workers=1, config=SandboxConfig(check_transform=True)) as checking:
        with pytest.raises(TranscriptError, match="without check_transform"):
            build_transcripts([eval_dir], [toy_task], "repl", None, checking)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(TranscriptError, match=r"bad\.jsonl:1: expected .* ending with an assistant turn"):
        read_transcripts([bad])


def test_the_per_task_cap_counts_the_rows_that_replay_not_the_candidates(tmp_path, toy_task, plain_pool):
    """The cap took the first candidates before the replay check: a task whose first program draws random numbers
    lost its good row."""
    folder = scored_folder(tmp_path / "z", toy_task, [ATTEMPTS[3], ATTEMPTS[2]], plain_pool)  # random, then flip
    rows, report = build_transcripts([folder], [toy_task], "repl", None, plain_pool, max_per_task=1)
    assert [r["source"].split("/")[-1] for r in rows] == ["1"] and report.skipped["not_reproduced"] == 1


def test_the_command_refuses_an_evaluation_split(tmp_path, capsys):
    from arc_trl.cli.transcripts import main

    assert main(["--eval-dir", str(tmp_path), "--dataset", "arc-agi-1/eval", "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "an evaluation split; transcripts are for training" in capsys.readouterr().err
