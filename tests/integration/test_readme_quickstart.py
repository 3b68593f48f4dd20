"""The README's Python quick start runs as written, on the tiny local model instead of the hub id, on CPU; and the
same code with `collapse_guard: rollback` and a provoked collapse detects it and rolls back, with no train_entry in
the way: the trainer honours ArcConfig's collapse guard itself (issue 44)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python quick start", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    (cwd / "quickstart.py").write_text(code)
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "quickstart.py"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1800)


def _guard_log(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "collapse_guard.jsonl").read_text().splitlines()]


def demo_layout(folder: Path, student: Path) -> Path:
    """`folder` laid out as a checkout after `make demo`: outputs/demo/student (here `student`), the configs, and
    .venv (the Python running the tests)."""
    (folder / "outputs" / "demo").mkdir(parents=True, exist_ok=True)
    (folder / "outputs" / "demo" / "student").symlink_to(student)
    (folder / "configs").symlink_to(ROOT / "configs")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    return folder


def test_readme_python_quick_start_runs_as_printed_and_says_what_it_did(tiny_model_dir, tmp_path):
    code = _quickstart()
    assert len(code.strip().splitlines()) <= 20
    assert 'model = "outputs/demo/student"' in code  # what `make demo` makes: run verbatim, from the demo's layout
    result = _run(code, demo_layout(tmp_path, tiny_model_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "runs/quickstart"
    state = json.loads((run / "checkpoint-2/trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "reward" in h]
    assert state["global_step"] == 2 and [h["step"] for h in steps] == [1, 2]
    # the episodes ran through the REPL rollout: its metrics are logged, each turn capped at 256 tokens
    assert all(1 <= h["episode/turns"] <= 2 and 0 < h["episode/model_tokens"] <= 2 * 256 for h in steps), steps
    # ArcConfig's default collapse_guard (warn) judged each step from Python too: its labels logged and recorded
    assert all(h["collapse_guard/level"] in (0, 1, 2) for h in steps), steps
    assert [r["step"] for r in _guard_log(run) if r["event"] == "step"] == [1, 2]
    # the run ends saying what it did (trainer.train() prints it, arc_trl/run_summary.py), and where to look
    out = result.stdout
    assert re.search(r"^\[arc-trl\] done: 2 steps in [\d.]+ s; reward ", out, re.M), out[-2000:]
    assert re.search(r"^\[arc-trl\] mean step [\d.]+ s = generate ", out, re.M), out[-2000:]
    assert "[arc-trl] checkpoints in runs/quickstart; episodes: arc-trl view runs/quickstart" in out
    if all(h["reward"] == -1.0 for h in steps):  # a random-init model parses no code: said, not left to guess
        assert "[arc-trl] reading: the reward stayed at barc's floor -1 (no code parsed in any episode)" in out
    dumped = [json.loads(line) for line in (run / "rollouts/step_000000.jsonl").read_text().splitlines()]
    assert len(dumped) == 4 and all(d["task"]["train"] and d["messages"] for d in dumped)


def _training_block() -> str:
    """The README's CPU training commands (the first bash block of its Training section)."""
    section = (ROOT / "README.md").read_text().split("## Training", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)


@pytest.mark.slow
@pytest.mark.vllm
def test_readme_training_commands_run_as_printed_after_make_demo(tiny_model_dir, tmp_path):
    """Every command of the README's CPU training block, as one bash script, from the demo's layout: the config
    check, two steps of GRPO with colocated vLLM, the report of its episodes, an evaluation and its report."""
    block = _training_block()
    assert block.startswith("source .venv/bin/activate")
    folder = demo_layout(tmp_path, tiny_model_dir)
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=folder, env=env, capture_output=True,
                            text=True, timeout=1800)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    summary = json.loads((folder / "outputs/tiny-cpu/run_summary.json").read_text())
    assert summary["global_step"] == 2
    assert (folder / "outputs/tiny-cpu/rollouts/report.html").read_text().count('<template id="task-') >= 1
    assert json.loads((folder / "outputs/eval-tiny/metrics.json").read_text())["n_attempts"] == 8
    report = (folder / "outputs/eval-tiny/report.html").read_text()
    assert report.count('<template id="task-') == 4 and "pass@1" in report
    assert re.search(r"^4 tasks, 8 attempts; pass@1 [\d.]+% · pass@2 [\d.]+% · Kaggle", result.stdout, re.M)
    assert "usage: arc-trl SUBCOMMAND" in result.stdout  # the last command, arc-trl --help


def _with_statements(code: str, **statements: str) -> str:
    """`code` with its top-level assignment to each NAME given replaced by `statements[NAME]` (each exactly once)."""
    spans = {}
    for node in ast.parse(code).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id in statements:
            name = target.id
            assert name not in spans, f"{name} is assigned twice in the quick start"
            spans[name] = (node.lineno, node.end_lineno)
    assert set(spans) == set(statements), f"the quick start no longer assigns {set(statements) - set(spans)}"
    lines = code.splitlines()
    for name, (first, last) in sorted(spans.items(), key=lambda item: -item[1][0]):
        lines[first - 1 : last] = statements[name].splitlines()
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_readme_quick_start_with_collapse_guard_rollback_catches_a_provoked_collapse(memorized_model_dir,
                                                                                      memorized_task, tmp_path):
    """The quick start's code with the provocation of tests/integration/test_collapse_run.py (learning rate 1.0 with
    weight decay 1.0 after a 2-step warm-up, on the memorised tiny model and its task; see that test for why it
    breaks the model and how the guard sees it), run in a Python process of its own like a user's script."""
    from arc_trl.data import save_tasks_folder

    folder = save_tasks_folder([memorized_task], tmp_path / "tasks")
    code = _with_statements(
        _quickstart(),
        model=f"model = {str(memorized_model_dir)!r}",
        tasks=f"tasks = load_tasks({str(folder)!r})",
        arc="arc = ArcConfig(max_turns=3, max_tokens_per_turn=400, sandbox_workers=2, sandbox_timeout_s=2.0,\n"
            "                collapse_guard='rollback', collapse_baseline_steps=2, collapse_window=1,\n"
            "                collapse_lr_scale=1e-6, collapse_max_rollbacks=1)",
        args="args = GRPOConfig(output_dir='runs/collapse', num_generations=4, per_device_train_batch_size=4,\n"
             "                  max_steps=5, max_completion_length=1200, logging_steps=1, use_vllm=False,\n"
             "                  report_to=[], use_cpu=True, bf16=False, seed=0, beta=0.0,\n"
             "                  model_init_kwargs={'dtype': 'float32'}, save_steps=1, save_total_limit=2,\n"
             "                  learning_rate=1.0, weight_decay=1.0, lr_scheduler_type='constant_with_warmup',\n"
             "                  warmup_steps=2)",
    )
    result = _run(code, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "runs/collapse"
    records = _guard_log(run)
    steps = [r for r in records if r["event"] == "step"]
    first = [r for r in steps if r["attempt"] == 0]
    # detected at the first step sampled after the bad update (step 2's), by several signals at once
    assert [r["label"] for r in first] == ["ok", "ok", "collapse"], [(r["step"], r["label"]) for r in first]
    assert len([f for f in first[-1]["fired"] if f["level"] == "collapse"]) >= 2, first[-1]["fired"]
    # rolled back: checkpoint-2 (the bad update's weights) rejected, checkpoint-1 the last ok one
    rollback = next(r for r in records if r["event"] == "rollback")
    assert rollback["from_step"] == 3 and rollback["resume_from"] == "runs/collapse/checkpoint-1"  # output_dir's form
    assert "[collapse-guard] rollback 1/1: collapse at step 3" in result.stderr
    second = [r for r in steps if r["attempt"] == 1]
    assert [r["step"] for r in second] == [2, 3, 4, 5] and all(r["label"] != "collapse" for r in second), second
    state = json.loads((run / "checkpoint-5/trainer_state.json").read_text())
    lrs = {h["step"]: h["learning_rate"] for h in state["log_history"] if "reward" in h}
    assert lrs[5] == pytest.approx(1e-6)  # 1.0 x collapse_lr_scale: the restored optimizer and scheduler rescaled
    assert not (run / "collapse_guard_stop.json").exists()
