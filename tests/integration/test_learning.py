"""The whole loop learns on CPU (a shortened `python -m arc_experiments.learning`, docs/learning.md "In CI").

The tiny model is warm-started with the demo's SFT config on reference REPL episodes of synthetic tasks, the teacher
is that student trained further (the demo's teacher config), and the first 16 steps of the demo's GRPO + on-policy
distillation config must raise the mean reward: the mean over the last 8 steps must exceed the reward of the first
step, which is scored before any update (the SFT student). Fixed seed (the configs' seed 0).

A fixed seed does not fix the trajectory: runs part ways from step 2 between machines (float32 rounding differs
between CPUs), and test runs did so even on this machine (a clean clone's suite run and a standalone run of this test
differed from step 2; cause not found). Step 1 is scored before any update and is the one step they all share
(reward 0.488 for seed 0 in every run we have), which makes it the stable "before". The last-8 mean was 1.28-1.89
over five seed-0 runs (three at `teacher_tau: 0.1`, two at 0.3) and 1.06-3.46 over ten seeds at 0.1
(docs/learning.md, "Seed study"). Windows of the first 4 steps against the last 8 failed once in a clean clone
(1.68 -> 1.51): steps 2-4 already learn or draw lucky tasks. teacher_kl falls over the demo's 50 steps but not
reliably within 16, so here the teacher is only checked to be live (a log-prob for every model token at every step).
The collapse guard runs in warn mode over the same run: a verdict for every step, and no action taken.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "demo"
STEPS, LAST, TEACHER_STEPS = 16, 8, 32


@pytest.mark.slow
def test_grpo_with_teacher_raises_reward(tiny_model_dir, tmp_path, monkeypatch):
    import torch

    from arc_trl.train_entry import main as train

    # conftest pins 1 thread; this one may use the cores no other worker runs on (`make test`: 2 workers on 2 cores,
    # so 1 thread: with 2 it competed with the other worker and took 633 s, with 1 it took 256 s, on the same VM)
    threads = torch.get_num_threads()
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
    try:
        _run(tiny_model_dir, tmp_path, monkeypatch, train)
    finally:
        torch.set_num_threads(threads)


def _run(tiny_model_dir, tmp_path, monkeypatch, train) -> None:
    monkeypatch.chdir(ROOT)  # the demo configs name configs/demo/prompt.yaml relative to the repository
    from arc_trl.cli.sft import main as sft
    student, teacher, run = tmp_path / "student", tmp_path / "teacher", tmp_path / "grpo"
    sft(["--config", str(DEMO / "sft-student.yaml"), "--model_name_or_path", str(tiny_model_dir),
         "--output_dir", str(student)])
    # the teacher only has to differ from the student and be scored on every token (checked below), not be the
    # demo's (128 steps): 32 steps of the demo's teacher SFT, a quarter of this test's CPU time saved
    sft(["--config", str(DEMO / "sft-teacher.yaml"), "--model_name_or_path", str(student),
         "--output_dir", str(teacher), "--max_steps", str(TEACHER_STEPS)])
    # the collapse guard watches the run in warn mode: a verdict every step, never an action (docs/collapse.md)
    summary = train(["--config", str(DEMO / "grpo-opd.yaml"), "--model_name_or_path", str(student),
                     "--teacher_model", str(teacher), "--output_dir", str(run), "--max_steps", str(STEPS),
                     "--collapse_guard", "warn", "--collapse_baseline_steps", "4", "--collapse_window", "4"])
    assert summary["global_step"] == STEPS

    logs = [h for h in json.loads((run / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert len(logs) == STEPS

    rewards = [h["reward"] for h in logs]
    before, after = rewards[0], sum(rewards[-LAST:]) / LAST
    shown = [round(r, 3) for r in rewards]
    assert after > before, f"reward did not rise: step 1 {before:.3f}, mean of the last {LAST} {after:.3f}: {shown}"
    for h in logs:  # the teacher term was live at every step: a teacher log-prob for every model token
        assert h["teacher_missing_frac"] == 0.0 and 0.0 < h["teacher_kl"] < 5.0, h

    verdicts = [json.loads(line) for line in (run / "collapse_guard.jsonl").read_text().splitlines()]
    verdicts = [v for v in verdicts if v["event"] == "step"]
    assert [v["step"] for v in verdicts] == list(range(1, STEPS + 1))
    assert all("episode/repeat_frac" in h and "episode/model_tokens" in h for h in logs)
    # In warn mode the guard labels and never acts: no stop, no rollback (the run reached STEPS, above). It is not
    # asked to label no step `collapse`: a step holds 2 tasks x 8 samples at a low entropy (0.02-0.1), so one task
    # whose 8 samples loop to the cap moves truncation, repetition and SUBMIT by ~0.4 together, which the break rules
    # judge a collapse (seen on a 2026-12-04 VM: step 15, 6 of 16 episodes at the cap, step 16 back at 1 of 16).
    # The guard counts episodes, not tasks (docs/collapse.md, "Limits"); its false-alarm rate on healthy series is
    # measured in tests/unit/collapse.
    events = [json.loads(line) for line in (run / "collapse_guard.jsonl").read_text().splitlines()]
    assert not [e for e in events if e["event"] not in ("train_begin", "step")], events
    assert {v["label"] for v in verdicts} <= {"ok", "warn", "collapse"}
    assert all(h["collapse_guard/level"] < 2 for h in logs)
