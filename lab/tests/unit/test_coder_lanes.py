"""Two queues (lanes) on one GPU machine sharing a work folder (lab/gpu_box/coder.sh's LANE): a warm start one lane
is making is waited for by the other, a lane waits for what the other makes, opt-in stages stay out of a plain run,
and a GRPO run's time budget ends it before the session's deadline."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from arc_experiments.coder import grpo
from arc_experiments.coder import run as queue
from arc_experiments.coder.plan import ARMS, GEN_KV_GIB, GEN_MEMORY, generate_argv


@pytest.fixture
def work(tmp_path):
    return queue.Work(root=tmp_path / "work", wheels=tmp_path / "wheels")


def _hold_lock(folder, seconds: float, makes: str = "") -> subprocess.Popen:
    """A process that holds `making(folder)` for `seconds`, then writes `makes` (a file: what it made) and lets go."""
    made = f"\n    Path({makes!r}).parent.mkdir(parents=True, exist_ok=True); Path({makes!r}).write_text('{{}}')" * bool(makes)
    code = (f"import time; from pathlib import Path; from arc_experiments.coder.work import making\n"
            f"with making(Path({str(folder)!r})):\n    print('held', flush=True); time.sleep({seconds}){made}\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_warm_start_another_process_is_making_is_not_ready_until_it_ends(work):
    folder = work.path("warm", "qwen05")
    work.path("models", "qwen05").mkdir(parents=True)
    work.path("models", "qwen05", "model.safetensors").write_bytes(b"")
    folder.mkdir(parents=True)
    (folder / "transcripts.jsonl").write_text("{}\n")
    ready = {name: is_ready for name, is_ready, _ in queue.stages(work)}
    assert ready["sft-qwen05"]() and ready["grpo-qwen05-grpo-s0"]()
    holder = _hold_lock(folder, 30)
    try:
        assert queue.being_made(folder)
        assert not ready["sft-qwen05"]() and not ready["grpo-qwen05-grpo-s0"]() and not ready["warm-qwen05"]()
    finally:
        holder.kill()
        holder.wait()
    assert not queue.being_made(folder) and ready["sft-qwen05"]()  # a killed holder releases it


def test_the_second_lane_finds_the_warm_start_made_and_does_not_train_it(work, monkeypatch):
    """The lock is taken before the first step: a lane that called warm_model while the other made it waits, then
    returns the made folder without a command of its own."""
    made = work.path("warm", "qwen05", "model")
    work.root.mkdir(parents=True)
    work.path("choice.json").write_text('{"chosen": "coder-digits"}')
    holder = _hold_lock(work.path("warm", "qwen05"), 1.0, makes=str(made / "config.json"))  # made while it holds
    assert not (made / "config.json").exists()
    monkeypatch.setattr(queue, "command", lambda *a, **k: pytest.fail("trained the warm start again"))
    started = time.monotonic()
    assert queue.warm_model(work, "qwen05") == made
    assert time.monotonic() - started >= 0.5  # it waited for the holder
    holder.wait()


def test_a_patient_lane_waits_for_a_stage_another_lane_makes_ready(work):
    work.root.mkdir(parents=True)
    flag = work.path("other-lane-done")
    ran = []
    stage = ("after-other", flag.exists, lambda: ran.append(1) or 0)
    threading.Timer(0.3, flag.touch).start()
    assert queue.run_stages(work, [stage], None, poll_s=0.05, patient_s=10) == 0 and ran == [1]
    flag.unlink()
    assert queue.run_stages(work, [stage], None, poll_s=0.05, patient_s=0) == 1 and ran == [1]  # never ready


def test_opt_in_stages_stay_out_of_a_plain_run(work, monkeypatch):
    seen = []
    monkeypatch.setattr(queue, "run_stages", lambda w, pending, *a, **k: seen.append([n for n, _, _ in pending]) or 0)
    queue.run(work, None, None)
    assert "fp8-server" not in seen[0] and "import-qwen05" in seen[0]
    queue.run(work, {"fp8-server", "import-qwen05"}, None)
    assert seen[1] == ["fp8-server", "import-qwen05"]


def test_a_grpo_runs_budget_ends_it_before_the_deadline():
    assert grpo.time_budget(None, 0.0) == ([], 3 * 3600)
    argv, limit = grpo.time_budget(1000.0 + grpo.STARTUP_S + 300, 1000.0)
    assert argv == ["--max_train_seconds", "300"] and limit == grpo.STARTUP_S + 300 + 30
    assert grpo.time_budget(1000.0 + grpo.STARTUP_S + 59, 1000.0) is None  # under a minute: not started


def test_an_engine_leaves_the_gpu_to_trainings_beside_it(tmp_path):
    """A fixed KV cache (no start-up profile to race) and a small free share asked for at its start."""
    argv = generate_argv(tmp_path, ARMS["coder-digits"], "arc-agi-1/train", tmp_path / "out", 8)
    assert float(argv[argv.index("--gpu-memory-utilization") + 1]) == GEN_MEMORY <= 0.25
    assert float(argv[argv.index("--kv-cache-memory-gib") + 1]) == GEN_KV_GIB


def test_the_deadline_file_moves_the_session_end_while_lanes_run(tmp_path, monkeypatch):
    """WORK/deadline (coder.sh deadline S) is read when each run starts and wins over GRPO_DEADLINE (fixed when a
    lane started): a session whose lanes run late can still give its runs the time left."""
    file = tmp_path / "deadline"
    monkeypatch.delenv("GRPO_DEADLINE", raising=False)
    assert grpo.session_deadline(file) is None
    monkeypatch.setenv("GRPO_DEADLINE", "1000")
    assert grpo.session_deadline(file) == 1000.0
    file.write_text("2500\n")
    assert grpo.session_deadline(file) == 2500.0


def test_a_lane_without_patience_waits_while_another_makes_a_warm_start(work):
    """A warm start another lane holds is something to wait for, not a stage that failed: even with no patience the
    lane runs its stage once the holder is done."""
    folder = work.path("warm", "qwen05")
    holder = _hold_lock(folder, 1.0)
    ran = []
    stage = ("after-warm-start", lambda: not queue.being_made(folder), lambda: ran.append(1) or 0)
    assert queue.run_stages(work, [stage], None, poll_s=0.05, patient_s=0) == 0 and ran == [1]
    holder.wait()
