"""Issue 41's GPU stages on CPU (arc_experiments/gpu/opd_stages.py, opd_budget.py): the dry run's commands and
estimates, the two-at-a-time pool with the teacher as a need, the held-out queue's order and neighbours on a fake
clock with runs that take time, the runs' time limit, and the time calibration from the committed logs."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from arc_experiments.gpu import opd_stages, runner
from arc_experiments.gpu.__main__ import main
from arc_experiments.gpu.opd_budget import RunCost, calibration
from arc_experiments.gpu.runner import Context
from arc_experiments.learning.opd_records import save_record

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


def test_validation_runs_the_student_the_teacher_then_every_sweep_run_and_fits_a_session(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.setattr(opd_stages, "committed_runs", lambda part="validation": set())  # a first machine
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
    # the choices: the committed validation records with this machine's over them, merged under WORK
    assert any("opd_records arms-file --validation" in c and "/choices/validation" in c for c in commands)
    assert "opd_report" in commands[-1] and "--part heldout" in commands[-2]
    # the teacher alone (~12.8 min) costs ~5.8 min more than beside a run: <= 52.5 min leaves ~2.5 of a ~55-min session
    # for the fetches
    assert "opd-teacher alone" in estimate[0] and float(estimate[-1].split(", ")[-1].split(" min")[0]) <= 52.5


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

    def fake_start(ctx, name, command, env=None):
        running.add(name)
        assert len(running) <= opd_stages.SLOTS, running
        events.append(f"start {name}")
        return _Process(codes[name], events, name, running)

    monkeypatch.setattr(opd_stages, "start", fake_start)
    monkeypatch.setattr(opd_stages, "first_step", lambda log, process: None)
    monkeypatch.setattr(opd_stages, "_record", lambda ctx, job, part, code, beside: events.append(f"record {job.name}"))
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


class _Clock:
    """The pool's `time`: sleeping moves it on (a pool that never ends fails instead of hanging the test)."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        assert self.now < 20_000, "the pool never ended"


class _Timed:
    """A run that ends (exit code 0) `duration` seconds of `clock` after its start; `duration` None: it never ends and
    ignores SIGTERM (killed: -9)."""

    def __init__(self, clock: _Clock, duration: float | None, on_end) -> None:
        self.clock, self.on_end, self.returncode, self.signals = clock, on_end, None, []
        self.end = None if duration is None else clock.now + duration

    def poll(self):
        if self.returncode is None and self.end is not None and self.clock.now >= self.end:
            self.returncode = 0
            self.on_end()
        return self.returncode

    def terminate(self) -> None:
        self.signals.append("TERM")

    def kill(self) -> None:
        self.signals.append("KILL")
        self.returncode = -9

    def wait(self, timeout=None):
        if self.returncode is None:
            assert timeout is not None, "a wait without a timeout on a run that never ends"
            self.clock.now += timeout
            raise subprocess.TimeoutExpired("train", timeout)
        return self.returncode


def _fake_gpu(monkeypatch, durations) -> tuple[_Clock, list, dict]:
    """Fake `start` (a _Timed run of durations(name)), `first_step`, `_record` and clock in opd_stages: the starts and
    ends [(time, "start"/"end", name)], the records {name: (exit code, neighbours)}."""
    clock, events, records, running = _Clock(), [], {}, set()

    def fake_start(ctx, name, command, env=None):
        running.add(name)
        assert len(running) <= opd_stages.SLOTS, running
        events.append((clock.now, "start", name))
        process = _Timed(clock, durations(name), lambda: (events.append((clock.now, "end", name)),
                                                          running.discard(name)))
        process.name = name
        return process

    def fake_record(ctx, job, part, code, beside):
        running.discard(job.name)
        records[job.name] = (code, beside)

    monkeypatch.setattr(opd_stages, "start", fake_start)
    monkeypatch.setattr(opd_stages, "first_step", lambda log, process: None)
    monkeypatch.setattr(opd_stages, "_record", fake_record)
    monkeypatch.setattr(opd_stages, "time", clock)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: [])  # a one-GPU pool, whatever this machine has
    return clock, events, records


def test_heldout_on_a_gpu_trains_the_teacher_alone_then_the_arms_two_at_a_time_seed_major(tmp_path, monkeypatch):
    # runs take time here (a dry run's end at once): teacher 700 s; grpo-only 300, peer 420, rl-mixed 380, rl-pure 340,
    # each + 10 s per seed
    own = {"grpo-only": 300, "opd-peer": 420, "opd-rl-mixed": 380, "opd-rl-pure": 340}
    clock, events, records = _fake_gpu(monkeypatch, lambda name: 700 if "teacher" in name else
                                       own[name.split("_", 1)[1]] + 10 * int(name.split("-s")[-1][0]))
    configs, work = ROOT / "configs" / "gpu" / "smollm2", tmp_path / "work"

    def fake_run(ctx, name, limit, command, env=None):
        if name == "opd-arms-file":  # the template as the arms file (the choices only change lr and teacher_tau)
            work.mkdir(parents=True, exist_ok=True)
            shutil.copy(configs / "opd-heldout.yaml", command[command.index("--out") + 1])
        return 0

    monkeypatch.setattr(opd_stages, "_files", lambda ctx: (configs, work))
    monkeypatch.setattr(opd_stages, "run", fake_run)
    ctx = Context(out=tmp_path / "out", work=tmp_path / "w", configs="configs/gpu/smollm2")
    (ctx.out / "opd" / "validation").mkdir(parents=True)
    assert opd_stages.opd_heldout(ctx) == 0
    arms = [f"s{s}_{a}" for s in range(3) for a in ("grpo-only", "opd-peer", "opd-rl-mixed", "opd-rl-pure")]
    starts = [(t, n) for t, kind, n in events if kind == "start"]
    assert [n for _, n in starts] == ["opd-teacher-rl-teacher"] + [f"opd-heldout-{a}" for a in arms]
    assert starts[1][0] >= 700 and records["opd-teacher-rl-teacher"] == (0, [])  # the teacher had the GPU alone
    # from t=700: s0_grpo-only and s0_opd-peer start together; grpo-only ends at 1000 (s0_opd-rl-mixed starts, to
    # 1380), the peer at 1120 (s0_opd-rl-pure starts, to 1460), rl-mixed at 1380 (s1_grpo-only starts, to 1690)
    assert records["opd-heldout-s0_grpo-only"] == (0, ["s0_opd-peer"])
    assert records["opd-heldout-s0_opd-peer"] == (0, ["s0_grpo-only", "s0_opd-rl-mixed"])
    assert records["opd-heldout-s0_opd-rl-mixed"] == (0, ["s0_opd-peer", "s0_opd-rl-pure"])
    assert records["opd-heldout-s0_opd-rl-pure"] == (0, ["s0_opd-rl-mixed", "s1_grpo-only"])
    assert all(n in arms for name, (_, beside) in records.items() if "heldout" in name for n in beside)
    assert all(beside for name, (_, beside) in records.items() if "heldout" in name)


def test_a_run_past_its_limit_is_stopped_with_124_and_the_others_records_are_written(tmp_path, monkeypatch):
    clock, events, records = _fake_gpu(monkeypatch, {"hung": None, "quick": 100, "after": 200}.get)
    job = lambda name, limit: opd_stages.Job(name, name, tmp_path / name / "config.yaml", tmp_path / name,  # noqa
                                             "g", name, (), limit)
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work")
    processes = {}
    start = opd_stages.start
    monkeypatch.setattr(opd_stages, "start", lambda c, n, cmd, env=None: processes.setdefault(n, start(c, n, cmd)))
    assert opd_stages.pool(ctx, [job("hung", 600), job("quick", 600), job("after", 600)], "p") == [124, 0, 0]
    assert list(records) == ["quick", "after", "hung"] and records["hung"] == (124, ["quick", "after"])
    # stopped at the first poll past 600 s (every 5 s), SIGTERM ignored for GRACE_S, then killed
    assert processes["hung"].signals == ["TERM", "KILL"] and clock.now == 605 + runner.GRACE_S
    # the records command of the stage's end keeps what the queue wrote (exit code, neighbours)
    save_record({"run": "r", "group": "g", "exit_code": 124, "neighbours": ["x"]}, tmp_path / "o", "heldout")
    save_record({"run": "r", "group": "g", "passes": {}}, tmp_path / "o", "heldout")
    assert json.loads((tmp_path / "o" / "heldout" / "g" / "r.json").read_text()) == {
        "run": "r", "group": "g", "passes": {}, "exit_code": 124, "neighbours": ["x"]}


def test_the_calibration_is_the_committed_machines_stage_seconds_less_their_other_commands():
    cal = calibration(ROOT)
    # machine 1: sweep 812 s less shared 2, sweep-configs 17, sweep-choice 6 = 787 s for 6 runs of 40 steps and
    # 2 x 128 x 4 episodes; machine 2: arms 1280 s less shared 282, arms-configs 17, arms-report 0 = 981 s for 6 runs of
    # 40 steps and 3 x 256 x 4 episodes
    episode_s = (981 / 6 - 787 / 6) / (3072 - 1024)
    assert cal.episode_s == pytest.approx(episode_s)
    assert cal.step_s == pytest.approx((787 / 6 - 1024 * episode_s) / 40)
    assert cal.student_s == pytest.approx(45.5 + 111.7)  # model import + SFT (teachers_results.json)
    # machine 3's lone run: 20 steps in 231 s at 4.05 s a step: 150 s outside its steps; the lone teacher (128 steps,
    # 3 x 256 x 4 episodes at twice the shared share) and an arm's run beside another (twice its share)
    assert (cal.lone_start_s, cal.lone_step_s) == pytest.approx((231 - 20 * 4.05, 4.05))
    teacher, arm = RunCost(1, 128, 3072), RunCost(12, 40, 3072)
    assert cal.wall(teacher, alone=True) == pytest.approx(150 + 128 * 4.05 + 3072 * 2 * episode_s)
    assert cal.wall(arm, alone=False) == pytest.approx(2 * (40 * cal.step_s + 3072 * episode_s))


def test_the_stages_need_the_smollm2_configs_and_the_works_student(tmp_path):
    with pytest.raises(SystemExit, match="configs/gpu/learning lacks"):
        opd_stages.opd_validation(Context(out=tmp_path, dry_run=True))
    with pytest.raises(SystemExit, match="not this --work's student"):
        opd_stages.opd_heldout(Context(out=tmp_path, work=tmp_path / "w", configs="configs/gpu/smollm2"))


def test_on_several_gpus_the_pool_runs_two_a_gpu_and_a_runs_neighbours_are_those_on_its_gpu(tmp_path, monkeypatch):
    """A 2-GPU machine runs 4 at a time (an OPD stage in about half the wall-clock), each run pinned to one GPU by
    CUDA_VISIBLE_DEVICES, no GPU ever holding more than SLOTS; a run's neighbours shared its GPU."""
    clock, gpu_of, on_gpu, records, most = _Clock(), {}, {"0": set(), "1": set()}, {}, [0]

    def fake_start(ctx, name, command, env=None):
        gpu = env["CUDA_VISIBLE_DEVICES"]
        gpu_of[name] = gpu
        on_gpu[gpu].add(name)
        assert len(on_gpu[gpu]) <= opd_stages.SLOTS, on_gpu
        most[0] = max(most[0], sum(len(names) for names in on_gpu.values()))
        return _Timed(clock, {"a": 100, "b": 300, "c": 100, "d": 300, "e": 100, "f": 100}[name],
                      lambda: on_gpu[gpu].discard(name))

    monkeypatch.setattr(opd_stages, "start", fake_start)
    monkeypatch.setattr(opd_stages, "first_step", lambda log, process: None)
    monkeypatch.setattr(opd_stages, "_record", lambda ctx, job, part, code, beside: records.update({job.name: beside}))
    monkeypatch.setattr(opd_stages, "time", clock)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0", "1"])
    job = lambda name: opd_stages.Job(name, name, tmp_path / name / "config.yaml", tmp_path / name, "g", name)  # noqa
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work")
    names = ["a", "b", "c", "d", "e", "f"]
    assert opd_stages.pool_gpus(ctx) == ("0", "1")
    assert opd_stages.pool(ctx, [job(n) for n in names], "p", gpus=opd_stages.pool_gpus(ctx)) == [0] * 6
    assert most[0] == 2 * opd_stages.SLOTS and clock.now < 100 + 300 + 100  # 4 at a time: faster than 2 at a time
    assert (gpu_of["a"], gpu_of["b"], gpu_of["c"], gpu_of["d"]) == ("0", "1", "0", "1")  # the emptier GPU first
    assert all(gpu_of[other] == gpu_of[name] for name, beside in records.items() for other in beside)
    assert records["a"] == ["c"] and records["b"] == ["d"]  # e and f went to GPU 0, freed first
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0"])
    assert opd_stages.pool_gpus(ctx) == ("",)  # one GPU: the environment's, no CUDA_VISIBLE_DEVICES set


def test_on_two_gpus_the_stages_spread_the_runs_but_the_held_out_teacher_trains_alone(tmp_path, monkeypatch):
    configs, work = ROOT / "configs" / "gpu" / "smollm2", tmp_path / "work"
    pools: list[tuple[str, tuple[str, ...]]] = []

    alones: list[tuple[str, bool]] = []

    def fake_pool(ctx, jobs, part, done=None, gpus=("",)):
        pools.extend((job.name, gpus) for job in jobs)
        alones.extend((job.name, job.alone) for job in jobs)
        return [0] * len(jobs)

    def fake_run(ctx, name, limit, command, env=None):
        if name == "opd-arms-file":
            work.mkdir(parents=True, exist_ok=True)
            shutil.copy(configs / "opd-heldout.yaml", command[command.index("--out") + 1])
        return 0

    monkeypatch.setattr(opd_stages, "_files", lambda ctx: (configs, work))
    monkeypatch.setattr(opd_stages, "run", fake_run)
    monkeypatch.setattr(opd_stages, "pool", fake_pool)
    monkeypatch.setattr(opd_stages, "committed_runs", lambda part="validation": set())  # a first machine
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0", "1"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = Context(out=tmp_path / "out", work=tmp_path / "w", configs="configs/gpu/smollm2")
    (ctx.out / "opd" / "validation").mkdir(parents=True)
    assert opd_stages.opd_heldout(ctx) == 0 and opd_stages.opd_validation(ctx) == 0
    teacher = [gpus for name, gpus in pools if name.startswith("opd-teacher")]
    assert teacher == [("0", "1"), ("0", "1")]  # in the pool on both parts, on a GPU of its own (alone)
    assert [alone for name, alone in alones if name.startswith("opd-teacher")] == [True, True]  # a GPU to itself
    assert all(gpus == ("0", "1") for name, gpus in pools if not name.startswith("opd-teacher"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # a host that gave this process two of its GPUs
    assert opd_stages.pool_gpus(ctx) == ("2", "3")


def test_gpu_ids_are_nvidia_smis_numbers_or_none_when_it_fails(monkeypatch):
    import subprocess

    def fake(stdout, code):
        return lambda *a, **k: subprocess.CompletedProcess(a, code, stdout=stdout, stderr="")

    monkeypatch.setattr(runner.subprocess, "run", fake("0\n1\n", 0))
    assert runner.gpu_ids() == ["0", "1"]
    monkeypatch.setattr(runner.subprocess, "run", fake("No devices were found\n", 6))
    assert runner.gpu_ids() == []


def test_validation_can_be_split_over_machines_and_an_rl_arms_runs_bring_the_teacher(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(opd_stages, "committed_runs", lambda part="validation": set())  # a first machine
    assert opd_stages.validation_arms(None) == (True, ["opd-peer", "grpo-only", "opd-rl-mixed", "opd-rl-pure"])
    assert opd_stages.validation_arms("grpo-only,opd-peer") == (False, ["opd-peer", "grpo-only"])
    assert opd_stages.validation_arms("opd-rl-pure") == (False, ["opd-rl-pure"])  # (its runs bring the teacher)
    assert opd_stages.validation_arms("teacher") == (True, [])  # the student-teacher gap alone
    with pytest.raises(SystemExit, match=r"\['opd-rl'\] match none of teacher, opd-peer"):
        opd_stages.validation_arms("opd-rl,grpo-only")
    assert main(["opd-validation", "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "o"),
                 "--only", "opd-rl-*", "--slots", "6"]) == 0
    runs = _trained([line for line in capsys.readouterr().out.splitlines() if line.startswith("== ")])
    assert runs[0].endswith("teacher/rl-teacher") and len(runs) == 1 + 4 + 2
    assert main(["opd-validation", "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "o"),
                 "--only", "grpo-only,opd-peer"]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("== ")]
    assert {r.split("/")[-2] for r in _trained(commands)} == {"opd-peer", "grpo-only"} and len(_trained(commands)) == 6
    assert not any("opd-teacher" in c for c in commands)
    with pytest.raises(SystemExit):
        main(["opd-validation", "--dry-run", "--out", str(tmp_path / "o"), "--slots", "0"])


def test_with_more_slots_runs_with_a_fixed_kv_cache_start_together_and_their_limits_grow(tmp_path, monkeypatch):
    """Six at a time on one GPU: only the first start waits for a logged step (vLLM's compile cache written); runs
    whose config fixes the KV cache then start at once (no memory profile to race), one without waits as before."""
    clock, events, records = _fake_gpu(monkeypatch, lambda name: 300)
    waits = []
    monkeypatch.setattr(opd_stages, "first_step", lambda log, process: waits.append(log.stem))

    def job(name: str, fixed: bool) -> opd_stages.Job:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(f"vllm_kv_cache_memory_gib: {6 if fixed else 'null'}\n")
        return opd_stages.Job(name, name, tmp_path / name / "config.yaml", tmp_path / name, "g", name)

    monkeypatch.setattr(opd_stages, "SLOTS", 6)  # the fake start's bound
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work", slots=6)
    jobs = [job(n, fixed=n != "f") for n in "abcdef"]
    assert opd_stages.pool(ctx, jobs, "p") == [0] * 6
    assert waits == ["a", "e"]  # b waited for a's first step; c-e started at once; f (no fixed cache) waited for e's
    assert [t for t, kind, _ in events if kind == "start"] == [0] * 6 and clock.now < 2 * 300
    assert records["a"] == (0, ["b", "c", "d", "e", "f"])
    clock.now, waits[:] = 0.0, []
    jobs = [job(n, fixed=n != "h") for n in "ghij"]  # h profiles its memory at start: i and j wait for the newest run
    assert opd_stages.pool(ctx, jobs, "p") == [0] * 4
    assert waits == ["g", "h", "i"]
    # a run's limit: 3x its estimate beside one other run, times slots / 2 (a busy GPU shared by more)
    two, six = (opd_stages._sweep_jobs(ROOT / "configs/gpu/smollm2/opd-sweep-grpo-only.yaml", "g", "g", "g", slots=k)
                for k in (2, 6))
    assert six[0].limit_s == pytest.approx(3 * two[0].limit_s, abs=2)


def test_a_second_validation_machine_reruns_the_arms_with_a_lost_run_whole_and_the_choice_waits_for_them(
        tmp_path, monkeypatch, capsys):
    """The validation of 2026-11-28 (one H200, its records as first committed: GRPO alone's and the peer's now under
    opd/first_student): 3 runs died at start (EADDRINUSE), of GRPO alone and the peer. Running the stage again runs
    those two arms' sweeps whole (6 runs, on the new machine's student) and nothing else (no teacher: every RL-teacher
    run finished); the held-out choice refuses until they are committed, then takes the committed records with the
    machine's new ones over them."""
    import shutil

    from arc_experiments.learning import opd_records

    committed, opd = tmp_path / "committed", ROOT / "results/gpu_learning_smollm2/opd"
    shutil.copytree(opd / "validation", committed / "validation")
    for arm in ("grpo-only", "opd-peer"):
        shutil.rmtree(committed / "validation" / arm)
        shutil.copytree(opd / "first_student" / arm, committed / "validation" / arm)
    monkeypatch.setattr(opd_stages, "committed_folder", lambda: committed)
    groups = opd_records.read_records(committed)["validation"]
    lost = opd_records.lost_runs(groups)
    assert lost == ["grpo-only/lr2e-05", "opd-peer/lr2e-05_tau1.0", "opd-peer/lr5e-05_tau1.0"]
    jobs: list[str] = []
    monkeypatch.setattr(opd_stages, "_files", lambda ctx: (ROOT / "configs/gpu/smollm2", tmp_path / "work"))
    monkeypatch.setattr(opd_stages, "run", lambda ctx, name, limit, command, env=None: 0)
    monkeypatch.setattr(opd_stages, "pool", lambda ctx, js, part, done=None, gpus=("",): jobs.extend(
        j.name for j in js) or [0] * len(js))
    ctx = Context(out=tmp_path / "out", work=tmp_path / "w", configs="configs/gpu/smollm2")
    assert opd_stages.opd_validation(ctx) == 0
    assert jobs == [f"opd-peer-lr{lr}_tau{tau}" for lr in ("2e-05", "5e-05") for tau in ("0.1", "1.0")] + [
        "grpo-only-lr2e-05", "grpo-only-lr5e-05"]
    assert "opd-rl-mixed: kept" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"runs \['grpo-only/lr2e-05', 'opd-peer/lr2e-05_tau1.0', 'opd-peer/lr5e"):
        opd_records.main(["arms-file", "--validation", str(committed / "validation"), "--template",
                          str(ROOT / "configs/gpu/smollm2/opd-heldout.yaml"), "--out", str(tmp_path / "a.yaml")])
    here = tmp_path / "out" / "opd" / "validation"
    for group in ("grpo-only", "opd-peer"):  # the second machine's records: every run finished, evaluated
        for run, record in groups[group].items():
            best = groups[group]["lr5e-05" if group == "grpo-only" else "lr5e-05_tau0.1"]
            opd_records.save_record({**record, "finished": True, "exit_code": 0, "passes": best["passes"]},
                                    here.parent, "validation")
    merged = opd_stages.merged_records(here, tmp_path / "merged" / "validation")
    assert sorted(p.stem for p in (merged / "opd-peer").glob("*.json")) == sorted(groups["opd-peer"])
    assert opd_records.main(["arms-file", "--validation", str(merged), "--template",
                             str(ROOT / "configs/gpu/smollm2/opd-heldout.yaml"), "--out", str(tmp_path / "a.yaml")]) == 0
    assert json.loads((merged / "teacher" / "rl-teacher.json").read_text())["passes"].keys() == {"0", "64", "128"}


def test_heldout_seeds_can_be_split_over_machines_each_with_its_own_teacher_record(tmp_path, capsys):
    assert main(["opd-heldout", "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "o"),
                 "--seeds", "0", "--slots", "6"]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("== ")]
    runs = [r.rsplit("/", 1)[1] for r in _trained(commands)]
    assert runs == ["rl-teacher", "s0_grpo-only", "s0_opd-peer", "s0_opd-rl-mixed", "s0_opd-rl-pure"]
    assert any("--part heldout" in c and c.endswith("--teacher-run rl-teacher-s0") for c in commands)
    assert opd_stages.teacher_record_name((1, 2)) == "rl-teacher-s1-2" and opd_stages.teacher_record_name(None) == \
        "rl-teacher"
    with pytest.raises(SystemExit, match=r"\[3\] not in .*opd-heldout.yaml's seeds \[0, 1, 2\]"):
        opd_stages.opd_heldout(Context(out=tmp_path / "o", configs="configs/gpu/smollm2", seeds=(1, 3), dry_run=True))


def test_heldout_only_some_arms_runs_those_and_the_teacher_only_when_an_asked_arm_needs_it(tmp_path, capsys):
    assert main(["opd-heldout", "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "o"),
                 "--only", "grpo-only,opd-peer", "--slots", "3"]) == 0
    out = capsys.readouterr().out
    runs = [r.rsplit("/", 1)[1] for r in _trained([line for line in out.splitlines() if line.startswith("== ")])]
    assert runs == [f"s{s}_{arm}" for s in (0, 1, 2) for arm in ("grpo-only", "opd-peer")]
    estimate = next(line for line in out.splitlines() if "estimate opd-heldout: student" in line)
    assert "alone" not in estimate  # the estimate counts the asked arms' six runs, no teacher
    assert main(["opd-heldout", "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "o"),
                 "--only", "teacher"]) != 0
    assert "no arm asked for" in capsys.readouterr().err
    assert main(["opd-heldout", "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "o"),
                 "--only", "opd-rl-pure", "--seeds", "0"]) == 0
    runs = [r.rsplit("/", 1)[1] for r in _trained([line for line in capsys.readouterr().out.splitlines()
                                                    if line.startswith("== ")])]
    assert runs == ["rl-teacher", "s0_opd-rl-pure"]
    assert main(["opd-heldout", "--dry-run", "--configs", "configs/gpu/smollm2", "--out", str(tmp_path / "o"),
                 "--only", "grpo"]) != 0
    assert "opd-heldout --only 'grpo': ['grpo'] match none of teacher, opd-peer" in capsys.readouterr().err


def test_an_alone_job_takes_an_empty_gpu_and_keeps_it_while_the_others_share_the_rest(tmp_path, monkeypatch):
    """On two GPUs the teacher (alone) gets GPU 0 to itself and four runs share GPU 1; on one GPU an alone job waits
    for the GPU to empty, and the jobs after it wait for it (jobs start in order: it is never starved)."""
    clock, gpu_of, on_gpu, records = _Clock(), {}, {"0": set(), "1": set(), "": set()}, {}

    def fake_start(ctx, name, command, env=None):
        gpu = (env or {}).get("CUDA_VISIBLE_DEVICES", "")
        gpu_of[name] = gpu
        on_gpu[gpu].add(name)
        assert len(on_gpu[gpu]) <= ctx.slots, on_gpu
        return _Timed(clock, {"teacher": 500}.get(name, 100), lambda: on_gpu[gpu].discard(name))

    monkeypatch.setattr(opd_stages, "start", fake_start)
    monkeypatch.setattr(opd_stages, "first_step", lambda log, process: None)
    monkeypatch.setattr(opd_stages, "_record", lambda ctx, job, part, code, beside: records.update({job.name: beside}))
    monkeypatch.setattr(opd_stages, "time", clock)
    job = lambda name, alone=False: opd_stages.Job(name, name, tmp_path / name / "config.yaml",  # noqa
                                                   tmp_path / name, "g", name, alone=alone)
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work", slots=4)
    names = ["teacher", "a", "b", "c", "d", "e"]
    jobs = [job("teacher", alone=True)] + [job(n) for n in names[1:]]
    assert opd_stages.pool(ctx, jobs, "p", gpus=("0", "1")) == [0] * 6
    assert gpu_of == {"teacher": "0", **{n: "1" for n in names[1:]}} and records["teacher"] == []
    assert records["a"] == ["b", "c", "d"] and clock.now == 500  # four a GPU: e after them; the teacher ends last
    clock.now, gpu_of = 0.0, {}
    jobs = [job("a"), job("teacher", alone=True), job("b")]
    assert opd_stages.pool(ctx, jobs, "p") == [0] * 3
    assert records["teacher"] == [] and records["a"] == [] and records["b"] == []
    assert clock.now >= 100 + 500 + 100  # one after another: a, the teacher alone, then b


def test_on_two_gpus_validation_trains_the_held_out_teacher_beside_the_sweeps_when_held_out_follows(tmp_path,
                                                                                                 monkeypatch):
    """A second machine with two GPUs and both parts: the RL-teacher arms are kept (committed), so validation needs
    no teacher, but the held-out part does: it trains on a GPU of its own beside the reruns (its alone time limit),
    and its record goes to the held-out part (not over the committed validation teacher's). The student is made on
    the first GPU only."""
    monkeypatch.setattr(opd_stages, "committed_runs", lambda part="validation": {
        (arm, run) for arm, runs in (("opd-rl-mixed", ("lr2e-05_tau0.1", "lr2e-05_tau1.0", "lr5e-05_tau0.1",
                                                       "lr5e-05_tau1.0")), ("opd-rl-pure", ("lr2e-05", "lr5e-05")),
                                     ("teacher", ("rl-teacher",))) for run in runs})
    monkeypatch.setattr(opd_stages, "_files", lambda ctx: (ROOT / "configs/gpu/smollm2", tmp_path / "work"))
    envs: dict[str, dict | None] = {}
    monkeypatch.setattr(opd_stages, "run", lambda ctx, name, limit, command, env=None: envs.update({name: env}) or 0)
    pooled: list[opd_stages.Job] = []
    monkeypatch.setattr(opd_stages, "pool", lambda ctx, js, part, done=None, gpus=("",): pooled.extend(js) or
                        [0] * len(js))
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0", "1"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = Context(out=tmp_path / "out", work=tmp_path / "w", configs="configs/gpu/smollm2", slots=6)
    assert opd_stages.opd_validation(ctx) == 0 and not any(j.name.startswith("opd-teacher") for j in pooled)
    assert envs["opd-student"] == {"CUDA_VISIBLE_DEVICES": "0"}
    pooled.clear()
    ctx.stages = ("opd-validation", "opd-heldout")
    save_record({"run": "rl-teacher", "group": "teacher", "passes": {"0": {}}, "exit_code": 0, "neighbours": []},
                ctx.out / "opd", "validation")  # as the pool and the records command leave it
    assert opd_stages.opd_validation(ctx) == 0
    opd = ctx.out / "opd"
    assert not (opd / "validation" / "teacher" / "rl-teacher.json").exists()
    assert json.loads((opd / "heldout" / "teacher" / "rl-teacher.json").read_text()) == {
        "run": "rl-teacher", "group": "teacher", "passes": {"0": {}}, "exit_code": 0, "neighbours": []}
    teacher = pooled[0]
    assert teacher.name == "opd-teacher-rl-teacher" and teacher.alone and len(pooled) == 1 + 4 + 2
    lone = opd_stages._sweep_jobs(ROOT / "configs/gpu/smollm2/opd-teacher.yaml", "t", "teacher", alone=True)
    assert teacher.limit_s == lone[0].limit_s
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0"])  # one GPU: the teacher after the sweeps,
    pooled.clear()                                                              # alone, in the held-out part
    assert opd_stages.opd_validation(ctx) == 0 and not any(j.name.startswith("opd-teacher") for j in pooled)
    assert envs["opd-student"] is None


def test_heldout_on_two_gpus_runs_the_arms_without_a_teacher_beside_it_and_the_rl_arms_after(tmp_path, monkeypatch):
    """--slots 3 on two GPUs: the teacher alone on GPU 0 (700 s); GRPO alone and the peer (3 seeds each, 300 s) three
    at a time on GPU 1 meanwhile; the RL-teacher arms once the teacher has finished, three a GPU; no run ever beside
    the teacher. A teacher kept from an earlier stage (its run_summary.json) lets the RL arms start at once."""
    clock, starts, on_gpu, records = _Clock(), {}, {"0": set(), "1": set()}, {}
    configs, work = ROOT / "configs" / "gpu" / "smollm2", tmp_path / "work"

    def fake_start(ctx, name, command, env=None):
        gpu = env["CUDA_VISIBLE_DEVICES"]
        on_gpu[gpu].add(name)
        assert len(on_gpu[gpu]) <= 3, on_gpu
        starts[name] = (clock.now, gpu)
        return _Timed(clock, 700 if "teacher" in name else 300, lambda: on_gpu[gpu].discard(name))

    def fake_run(ctx, name, limit, command, env=None):
        if name == "opd-arms-file":
            work.mkdir(parents=True, exist_ok=True)
            shutil.copy(configs / "opd-heldout.yaml", command[command.index("--out") + 1])
        return 0

    monkeypatch.setattr(opd_stages, "start", fake_start)
    monkeypatch.setattr(opd_stages, "first_step", lambda log, process: None)
    monkeypatch.setattr(opd_stages, "_record", lambda ctx, job, part, code, beside: records.update({job.name: beside}))
    monkeypatch.setattr(opd_stages, "time", clock)
    monkeypatch.setattr(opd_stages, "_files", lambda ctx: (configs, work))
    monkeypatch.setattr(opd_stages, "run", fake_run)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0", "1"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    ctx = Context(out=tmp_path / "out", work=tmp_path / "w", configs="configs/gpu/smollm2", slots=3)
    (ctx.out / "opd" / "validation").mkdir(parents=True)
    assert opd_stages.opd_heldout(ctx) == 0
    teacher = starts.pop("opd-teacher-rl-teacher")
    assert teacher == (0.0, "0") and records["opd-teacher-rl-teacher"] == []
    rl = {n: v for n, v in starts.items() if "opd-rl" in n}
    others = {n: v for n, v in starts.items() if "opd-rl" not in n}
    assert len(rl) == len(others) == 6 and {gpu for _, gpu in others.values()} == {"1"}
    assert sorted(t for t, _ in others.values()) == [0, 0, 0, 300, 300, 300]
    assert all(t >= 700 for t, _ in rl.values()) and {gpu for _, gpu in rl.values()} == {"0", "1"}
    assert not any("teacher" in n for beside in records.values() for n in beside)
    # a kept teacher: the RL arms need not wait
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "run_summary.json").write_text("{}")
    clock.now, starts = 0.0, {}
    jobs = [opd_stages.Job("t", "t", kept / "config.yaml", kept, "teacher", "rl-teacher", alone=True),
            opd_stages.Job("rl", "rl", tmp_path / "rl.yaml", tmp_path / "rl", "arms", "opd-rl-pure", ("t",))]
    assert opd_stages.pool(ctx, jobs, "heldout", gpus=("0", "1")) == [0, 0]
    assert list(starts) == ["rl"] and starts["rl"][0] == 0
