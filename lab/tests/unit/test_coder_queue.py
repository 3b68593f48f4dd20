"""arc_experiments/coder's queue on a GPU machine (run.py, scoring.py): wheels are assembled while folders are
being scored, a scorer's failure is the run's failure, a stuck scorer is killed at its deadline, and no scorer
outlives the queue. Stand-in stages and scorers (small subprocesses), no model."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from arc_experiments.coder import packing
from arc_experiments.coder import run as queue
from arc_experiments.coder.scoring import Scorer, scorers_running, stop_scorers


def scorer(work, folder: str, code: str) -> Scorer:
    process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    entry = Scorer(folder, process)
    work.scorers.append(entry)
    return entry


def events(work) -> list[dict]:
    return [json.loads(line) for line in work.path("timeline.jsonl").read_text().splitlines()]


@pytest.fixture
def work(tmp_path):
    return queue.Work(root=tmp_path, wheels=tmp_path / "wheels")


def test_wheels_are_assembled_while_a_folder_is_being_scored(work, tmp_path, monkeypatch):
    """The 1.5B's wheels arrive while the 0.5B's folders are scored: its import must not wait for the scorers."""
    arrived = tmp_path / "arrived"
    scorer(work, "zero-shot/qwen05/eval", "import time; time.sleep(5)")
    monkeypatch.setattr(queue, "stages", lambda w: [("import-qwen15", arrived.exists, lambda: 0)])
    started = time.monotonic()
    assert queue.run(work, None, ["touch", str(arrived)], poll_s=0.05) == 0
    timeline = events(work)
    order = [e.get("event") for e in timeline]
    assert order.index("start") < order.index("scored"), timeline  # the import ran while the scorer still ran
    assert time.monotonic() - started < 30


def test_a_failed_scorer_fails_the_run_and_is_named(work, monkeypatch, capsys):
    monkeypatch.setattr(queue, "stages", lambda w: [("zero-shot-qwen15", lambda: True,
                                                     lambda: scorer(w, "zero-shot/qwen15/train", "exit(3)") and 0)])
    assert queue.run(work, None, None, poll_s=0.05) == 1
    assert work.failed_scores == ["zero-shot/qwen15/train"]
    assert "zero-shot/qwen15/train" in capsys.readouterr().out
    assert {"event": "scored", "folder": "zero-shot/qwen15/train", "rc": 3}.items() <= events(work)[-1].items()


def test_a_scorer_past_its_deadline_is_killed_with_its_sandbox_processes(work, tmp_path):
    """A stuck replay (or a sandbox child it left) must not hold the queue, or the machine, for ever."""
    pid_file = tmp_path / "child.pid"
    stuck = scorer(work, "warm/qwen05/eval", "import subprocess, sys, time\n"
                   "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                   f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)")
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert scorers_running(work, deadline_s=3600.0)  # within its deadline: left alone
    stuck.started -= 3601.0
    assert not scorers_running(work, deadline_s=3600.0)
    assert stuck.process.returncode is not None and work.failed_scores == ["warm/qwen05/eval"]
    assert events(work)[-1]["rc"] == 124
    assert not pid_alive(child)


def test_no_scorer_outlives_the_queue(work, monkeypatch):
    running = []

    def stage() -> int:
        running.append(scorer(work, "zero-shot/qwen15/eval", "import time; time.sleep(60)"))
        raise KeyboardInterrupt  # the queue is stopped while the folder is scored

    monkeypatch.setattr(queue, "stages", lambda w: [("zero-shot-qwen15", lambda: True, stage)])
    with pytest.raises(KeyboardInterrupt):
        queue.run(work, None, None, poll_s=0.05)
    assert running[0].process.poll() is not None and not work.scorers
    stop_scorers(work)  # idempotent


def pid_alive(pid: int) -> bool:
    for _ in range(100):  # SIGKILL is asynchronous: give the kernel a moment
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.05)
    return True


def test_a_warm_adapter_comes_back_in_parts_that_join_into_its_folder(work, tmp_path, monkeypatch):
    """pack-model: call K writes parts 4K..4K+3 (64 MiB a call); joined here (`cat`), they unpack into warm/MODEL/model whole."""
    import tarfile

    monkeypatch.setattr(packing, "PART_BYTES", 2000)
    model = work.path("warm", "qwen15", "model")
    model.mkdir(parents=True)
    weights = bytes(range(256)) * 40  # a 20,480-byte tar (headers, padding): 11 parts of 2,000 bytes, three calls
    (model / "adapter_model.safetensors").write_bytes(weights)
    (model / "adapter_config.json").write_text('{"r": 32}')
    out = tmp_path / "out"
    assert packing.pack_model(work.root, "qwen15", out, 0, tmp_path) == 0
    assert len(list(out.iterdir())) == 4
    assert packing.pack_model(work.root, "qwen15", out, 1, tmp_path) == 0
    assert packing.pack_model(work.root, "qwen15", out, 2, tmp_path) == 0
    assert len(list(out.iterdir())) == 11
    assert packing.pack_model(work.root, "qwen15", out, 3, tmp_path) == 3  # nothing left: that call is one too many
    parts = sorted(out.iterdir())
    assert [p.name[-2:] for p in parts] == [f"{i:02d}" for i in range(len(parts))]
    joined = tmp_path / "joined.tar"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(joined) as tar:
        tar.extractall(tmp_path / "there", filter="data")
    assert (tmp_path / "there/warm/qwen15/model/adapter_model.safetensors").read_bytes() == weights


def test_a_full_model_is_not_packed(work, tmp_path):
    (work.path("warm", "qwen05", "model")).mkdir(parents=True)
    (work.path("warm", "qwen05", "model", "config.json")).write_text("{}")
    assert packing.pack_model(work.root, "qwen05", tmp_path / "out", 0, tmp_path) == 2
    assert not (tmp_path / "out").exists()


def test_the_warm_training_split_comes_after_the_speed_benchmark(work):
    """The longest folders no choice reads run last: a machine's time left goes to the eval table and the ratio."""
    names = [name for name, _, _ in queue.stages(work)]
    assert names.index("warm-qwen15") < names.index("speed") < names.index("warm-train-qwen15")
    assert names.index("warm-qwen05") < names.index("speed") < names.index("warm-train-qwen05")


def test_a_warm_stage_waits_for_its_models_import(work):
    """A carried-in zero-shot training folder makes the warm stages' transcripts possible, not their SFT: while the
    model's wheels are still arriving, neither warm stage of that model is ready (it would fail without a model)."""
    folder = work.path("zero-shot", "qwen15", "train")
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"n_attempts": 3200, "n_tasks": 400}))
    (folder / "metrics.md").write_text("done\n")
    ready = {name: is_ready for name, is_ready, _ in queue.stages(work)}
    assert not ready["warm-qwen15"]() and not ready["warm-train-qwen15"]()
    work.path("models", "qwen15").mkdir(parents=True)
    work.path("models", "qwen15", "model.safetensors").write_bytes(b"")
    assert ready["warm-qwen15"]() and ready["warm-train-qwen15"]()
