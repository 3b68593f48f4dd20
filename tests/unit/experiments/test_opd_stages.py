"""Issue 41's GPU stages on CPU (arc_experiments/gpu/opd_stages.py, opd_budget.py): the dry run's commands and
estimates, the two-at-a-time pool with the teacher as a need, and the time calibration from the committed logs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from arc_experiments.gpu import opd_stages
from arc_experiments.gpu.__main__ import main
from arc_experiments.gpu.opd_budget import calibration
from arc_experiments.gpu.runner import Context

ROOT = Path(__file__).resolve().parents[3]


def _dry(tmp_path, capsys, stage: str) -> tuple[list[str], list[str]]:
    assert main([stage, "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "out"), "--work",
                 str(tmp_path / "work")]) == 0
    lines = capsys.readouterr().out.splitlines()
    return [line for line in lines if line.startswith("== ")], [line for line in lines if "estimate" in line]


def _trained(commands: list[str]) -> list[str]:
    """The run folders of the printed `arc_trl train --config FOLDER/config.yaml` commands, in order."""
    return [str(Path(shlex.split(c.split(": ", 1)[1])[-1]).parent) for c in commands if "-m arc_trl train" in c
            and "sweep" not in c]


def test_validation_runs_the_student_the_teacher_then_every_sweep_run_and_fits_a_session(tmp_path, capsys):
    commands, estimate = _dry(tmp_path, capsys, "opd-validation")
    runs = _trained(commands)
    opd = "/tmp/arc-gpu/smollm2/opd"
    assert runs[0] == f"{opd}/teacher/rl-teacher" and len(runs) == 1 + 4 + 2 + 4 + 2 == len(set(runs))
    assert {r.split("/")[-2] for r in runs[1:]} == {"opd-peer", "grpo-only", "opd-rl-mixed", "opd-rl-pure"}
    assert "--only student --with-needs" in commands[0] and "--part validation" in commands[-1]
    # each session is under ~55 min of wall-clock: the estimate, setup included, must leave room for the fetches
    assert "min with the setup" in estimate[-1] and float(estimate[-1].split(", ")[-1].split(" min")[0]) <= 50


def test_heldout_runs_whole_seeds_in_order_then_records_and_the_report(tmp_path, capsys):
    commands, estimate = _dry(tmp_path, capsys, "opd-heldout")
    runs = [r.rsplit("/", 1)[1] for r in _trained(commands)]
    assert runs[0] == "rl-teacher"
    assert runs[1:] == [f"s{s}_{a}" for s in range(3) for a in ("grpo-only", "opd-peer", "opd-rl-mixed", "opd-rl-pure")]
    assert any("opd_records arms-file --validation" in c and "results/gpu_learning_smollm2/opd/validation" in c
               for c in commands)
    assert "opd_report" in commands[-1] and "--part heldout" in commands[-2]
    assert float(estimate[-1].split(", ")[-1].split(" min")[0]) <= 50


class _Process:
    """A run that ends (exit code `code`) at its second poll, noting its end and leaving `running`."""

    def __init__(self, code: int, events: list[str], name: str, running: set[str]) -> None:
        self.code, self.events, self.name, self.running, self.polls = code, events, name, running, 0
        self.returncode = None

    def poll(self):
        self.polls += 1
        if self.polls >= 2 and self.returncode is None:
            self.returncode = self.code
            self.events.append(f"end {self.name}")
            self.running.discard(self.name)
        return self.returncode


def test_the_pool_runs_two_at_a_time_waits_for_the_teacher_and_skips_what_needs_a_failed_one(tmp_path, monkeypatch):
    events: list[str] = []
    codes = {"teacher": 1, "peer": 0, "control": 0, "rl": 0}
    running: set[str] = set()

    def fake_start(ctx, name, command):
        running.add(name)
        assert len(running) <= opd_stages.SLOTS, running
        events.append(f"start {name}")
        return _Process(codes[name], events, name, running)

    monkeypatch.setattr(opd_stages, "start", fake_start)
    monkeypatch.setattr(opd_stages, "first_step", lambda log, process: None)
    monkeypatch.setattr(opd_stages, "_record", lambda ctx, job, part: events.append(f"record {job.name}"))
    monkeypatch.setattr(opd_stages.time, "sleep", lambda s: None)
    job = lambda name, needs=(): opd_stages.Job(name, name, tmp_path / name / "config.yaml", tmp_path / name,  # noqa
                                               "g", name, needs)
    done = job("done")
    done.output_dir.mkdir()
    (done.output_dir / "run_summary.json").write_text("{}")  # finished on an earlier call: kept
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work")
    result = opd_stages.pool(ctx, [job("teacher"), done, job("rl", ("teacher",)), job("peer"), job("control")], "p")
    assert result == [1, 0, 2, 0, 0]
    assert "start rl" not in events and "start done" not in events
    assert events.index("start peer") < events.index("end teacher")  # the second slot works while the teacher trains
    assert [e for e in events if e.startswith("record")] == ["record teacher", "record peer", "record control"]


def test_the_calibration_is_the_committed_machines_stage_seconds_less_their_other_commands():
    cal = calibration(ROOT)
    # machine 1: sweep 812 s less shared 2, sweep-configs 17, sweep-choice 6 = 787 s for 6 runs of 40 steps and
    # 2 x 128 x 4 episodes; machine 2: arms 1280 s less shared 282, arms-configs 17, arms-report 0 = 981 s for 6 runs of
    # 40 steps and 3 x 256 x 4 episodes
    episode_s = (981 / 6 - 787 / 6) / (3072 - 1024)
    assert cal.episode_s == pytest.approx(episode_s)
    assert cal.step_s == pytest.approx((787 / 6 - 1024 * episode_s) / 40)
    assert cal.student_s == pytest.approx(45.5 + 111.7)  # model import + SFT (teachers_results.json)


def test_the_stages_need_the_smollm2_configs_and_the_works_student(tmp_path):
    with pytest.raises(SystemExit, match="configs/gpu/learning lacks"):
        opd_stages.opd_validation(Context(out=tmp_path, dry_run=True))
    with pytest.raises(SystemExit, match="not this --work's student"):
        opd_stages.opd_heldout(Context(out=tmp_path, work=tmp_path / "w", configs="configs/gpu/smollm2"))
