"""`arc-trl view` without a browser: the grids' drawing, what is read from an evaluation folder and from rollout
dumps, the escaping of model text and the page's script policy (tests/integration/test_view_browser.py opens the
report in a real browser)."""

from __future__ import annotations

import base64
import hashlib
import json
import re

import numpy as np
import pytest
from eval_folder import write_eval_folder

from arc_trl.cli.main import main as arc_trl
from arc_trl.tasks import load_tasks
from arc_trl.view import load_source, render_report
from arc_trl.view.grids import PALETTE, differing_cells, grid_rgb, grid_svg
from arc_trl.view.report import message_segments


@pytest.fixture(scope="module")
def eval_tasks():
    return load_tasks("arc-agi-1/eval", ids=["00576224", "009d5c81", "00dbd492"])


def test_grid_svg_draws_each_colour_run_and_marks_the_differing_cells():
    svg = grid_svg([[1, 1, 0], [2, 3, 3]], expected=[[1, 1, 0], [2, 3, 4]])
    assert 'data-rows="2" data-cols="3" data-diff="1"' in svg
    assert '<path d="M0 0h2v1h-2z" fill="#0074D9"/>' in svg  # the run of two blues: one shape
    assert '<path d="M1 1h2v1h-2z" fill="#37D449"/>' in svg
    assert svg.count("M2.25 1.25l.5 .5") == 2  # the X on cell (1, 2), edge and centre strokes
    assert "M2.25" not in grid_svg([[1, 1, 0], [2, 3, 3]], expected=[[1]])  # another shape: no cell to mark
    assert differing_cells([[1, 2]], [[1, 3]]) == [(0, 1)] and differing_cells([[1]], [[1, 1]]) is None


def test_grid_rgb_uses_the_same_palette_and_marks():
    image = grid_rgb([[1, 2]], expected=[[1, 3]], cell=8)
    assert image.shape == (8, 16, 3) and image.dtype == np.uint8
    blue = tuple(int(PALETTE[1][i:i + 2], 16) for i in (1, 3, 5))
    assert tuple(image[4, 5]) == blue  # inside cell (0, 0)
    assert tuple(image[2, 8 + 2]) == (255, 255, 255)  # the X on the differing cell (0, 1)
    assert tuple(image[0, 3]) == (0x55, 0x55, 0x55)  # grid line


def test_message_segments_split_prose_and_the_code_the_sandbox_runs():
    text = "I will check.\n```python\nprint(1)\n```\nThen:\n```text\n0 1\n```\n```python\nSUBMIT(x)\n```"
    pieces = list(message_segments(text))
    assert [kind for kind, _ in pieces] == ["text", "code", "text", "code"]
    assert pieces[0][1] == "I will check." and "```text" in pieces[2][1]  # a text block is not code
    assert "print" in str(pieces[1][1]) and 'class="nb"' in str(pieces[1][1])  # highlighted by pygments


def test_an_evaluation_folder_reads_as_tasks_with_turns_outputs_and_verdicts(tmp_path, eval_tasks):
    folder = write_eval_folder(tmp_path / "eval", eval_tasks)
    source = load_source(folder)
    assert source.kind == "evaluation" and source.dataset == "arc-agi-1/eval"
    assert [t.task_id for t in source.tasks] == [t.id for t in eval_tasks]
    first = source.tasks[0]
    assert first.task is not None and first.solved and first.n_passed == 1
    solved, failed = first.attempts
    assert solved.kind == "solved" and solved.expected == eval_tasks[0].test_outputs
    assert failed.kind == "runtime" and failed.predictions == [None]
    assert [t.shown for t in solved.turns] == [True, False]  # the last reply never reached the model
    assert solved.turns[0].output == "(3, 3)" and solved.turns[1].output == "SUBMIT accepted: 1 grid recorded."
    wrong = source.tasks[1].attempts[0]
    assert wrong.kind == "wrong" and wrong.test_correct == [False] and 0 < wrong.pixel < 1


def test_the_report_escapes_model_text_and_runs_only_its_own_script(tmp_path, eval_tasks):
    folder = write_eval_folder(tmp_path / "eval", eval_tasks, hostile_task=eval_tasks[1].id)
    html = render_report(load_source(folder))
    assert "<script>window" not in html and "<img" not in html and "<b on" not in html  # no tag from the model
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html  # shown, as text
    assert "&lt;/textarea&gt;&lt;/template&gt;" in html
    assert html.count("<script>") == 1 and html.count("</template>") == len(eval_tasks)
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing to fetch


def test_rollout_dumps_read_as_episodes_with_reward_parts(tmp_path, eval_tasks):
    task = eval_tasks[0]
    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)
    record = {"step": 4, "task_id": task.id, "index": 1, "finish_reason": "submitted", "reward": 0.5,
              "reward_parts": {"arc_reward_barc": 1.0, "pixel_score": 0.25}, "advantage": -0.1,
              "outcome": {"code_found": True, "submitted": True, "test_predictions": task.test_inputs},
              "test_outputs": task.test_outputs, "test_correct": [False], "test_pixel": [0.0], "passed": False,
              "task": task.to_json(), "num_model_tokens": 12, "final_observation": "False\nSUBMIT accepted",
              "messages": [{"role": "assistant", "content": "```python\nSUBMIT(test_inputs[0])\n```"}]}
    old = {"task_id": task.id, "finish_reason": "truncated", "reward": -1.0, "advantage": 0.0,
           "outcome": {"code_found": False}, "env_mask": [1, 1, 0], "text": "<|im_start|>... no code"}
    (run / "rollouts" / "step_000004.jsonl").write_text(json.dumps(record) + "\n")
    (run / "rollouts" / "step_000012.jsonl").write_text(json.dumps(old) + "\n")  # a dump of before issue 64
    source = load_source(run)
    assert source.kind == "rollouts" and len(source.tasks) == 1
    new, before = source.tasks[0].attempts
    assert new.label == "step 4 · episode 1" and new.kind == "wrong" and new.reward_parts["pixel_score"] == 0.25
    assert new.turns[-1].output == "False\nSUBMIT accepted" and not new.turns[-1].shown
    assert before.label.startswith("step 12") and before.kind == "truncated" and before.model_tokens == 2
    assert before.test_correct == [False]  # scored from its outcome against the task of the newer dump
    html = render_report(source)
    assert "arc_reward_barc <b>1.000</b>" in html and 'class="grid"' in html


def test_arc_trl_view_writes_the_report_beside_what_it_read(tmp_path, eval_tasks, capsys):
    folder = write_eval_folder(tmp_path / "eval", eval_tasks)
    assert arc_trl(["view", str(folder)]) == 0
    assert (folder / "report.html").is_file() and "3 tasks, 6 attempts" in capsys.readouterr().out
    assert arc_trl(["view", str(tmp_path / "nothing")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        arc_trl(["view", "--help"])
    assert exit_info.value.code == 0 and "--dataset" in capsys.readouterr().out
