"""The whole loop learns on CPU (a shortened `scripts/demo_learning.py`, docs/learning.md "In CI").

The tiny model is warm-started with the demo's SFT config on reference REPL episodes of synthetic tasks, the teacher
is that student trained further (the demo's teacher config), and the first 16 steps of the demo's GRPO + on-policy
distillation config must raise the mean reward and the valid-submission rate: the mean over the last 8 steps must
exceed the mean over the first 4 (the SFT student, before RL has moved it much). Fixed seed (the configs' seed 0).

A fixed seed does not fix the trajectory across machines: float32 kernels round differently on other CPUs, so runs
agree on step 1 and part ways from step 2. The windows and the config's `teacher_tau: 0.1` come from a seed study
(docs/learning.md, "Seed study"): over seeds 0-9 the reward rose by +0.29 to +2.52 and the valid rate by 12 to 59
points; at `teacher_tau: 0.3`, of 7 runs, the reward fell in one and the valid rate in another. teacher_kl falls over
the demo's 50 steps but not reliably within 16, so here the teacher is only checked to be live (a log-prob for every
model token at every step).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from model_helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo"
STEPS, FIRST, LAST = 16, 4, 8


@pytest.mark.slow
def test_grpo_with_teacher_raises_reward_and_valid_submissions(tiny_model_dir, tmp_path, monkeypatch):
    import torch

    from arc_trl.train_entry import main as train

    threads = torch.get_num_threads()  # conftest pins 1 thread for the parallel tests; this one may use every core
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    try:
        _run(tiny_model_dir, tmp_path, monkeypatch, train)
    finally:
        torch.set_num_threads(threads)


def _run(tiny_model_dir, tmp_path, monkeypatch, train) -> None:
    monkeypatch.chdir(ROOT)  # the demo configs name configs/demo/prompt.yaml relative to the repository
    sft = load_script("sft").main
    student, teacher, run = tmp_path / "student", tmp_path / "teacher", tmp_path / "grpo"
    sft(["--config", str(DEMO / "sft-student.yaml"), "--model_name_or_path", str(tiny_model_dir),
         "--output_dir", str(student)])
    sft(["--config", str(DEMO / "sft-teacher.yaml"), "--model_name_or_path", str(student),
         "--output_dir", str(teacher)])
    summary = train(["--config", str(DEMO / "grpo-opd.yaml"), "--model_name_or_path", str(student),
                     "--teacher_model", str(teacher), "--output_dir", str(run), "--max_steps", str(STEPS)])
    assert summary["global_step"] == STEPS

    logs = [h for h in json.loads((run / "trainer_state.json").read_text())["log_history"] if "reward" in h]
    assert len(logs) == STEPS

    def rise(key: str) -> tuple[float, float]:
        values = [h[key] for h in logs]
        return sum(values[:FIRST]) / FIRST, sum(values[-LAST:]) / LAST

    first, last = rise("reward")
    rewards = [round(h["reward"], 3) for h in logs]
    assert last > first, f"reward did not rise: first {FIRST} steps {first:.3f}, last {LAST} {last:.3f}: {rewards}"
    first, last = rise("rewards/valid_outputs/mean")
    assert last > first, f"valid submissions did not rise: {first:.2f} -> {last:.2f}"
    for h in logs:  # the teacher term was live at every step: a teacher log-prob for every model token
        assert h["teacher_missing_frac"] == 0.0 and 0.0 < h["teacher_kl"] < 5.0, h
