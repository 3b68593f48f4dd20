"""HTCondor submit descriptions (parsed with the real `htcondor` bindings), the condor launcher without a schedd,
single-job submission, and the vLLM server wrapper (GPU plan, resume, process lifecycle with fake servers)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

htcondor = pytest.importorskip("htcondor2")

from arc_trl.launch import condor
from arc_trl.launch.condor import CondorError, CondorResources, build_submit, format_arguments
from arc_trl.launch.launch_config import gpu_split
from arc_trl.launch.launchers import run_sweep
from arc_trl.launch.server_plan import LaunchPlan, PlanError, ProcessSpec, build_plan
from arc_trl.launch.server_runner import main as wrapper_main
from arc_trl.launch.server_runner import run_plan
from arc_trl.launch.single_jobs import main as submit_main
from arc_trl.launch.sweep import SweepError

REPO = Path(__file__).resolve().parents[3]

FOUR_GPU = {
    "model_name_or_path": "Qwen/Qwen3-8B",
    "use_vllm": True,
    "vllm_mode": "server",
    "vllm_server_base_url": "http://localhost:8000",
    "teacher_backend": "server",
    "teacher_model": "Qwen/Qwen3-32B",
    "teacher_server_url": "http://localhost:8001",
    "teacher_tau": 0.3,
    "trainer_gpus": 1,
    "vllm_gpus": 2,
    "teacher_gpus": 1,
    "sandbox_workers": 16,
    "learning_rate": 2.0e-6,
}


@pytest.fixture(autouse=True)
def no_schedd(monkeypatch):
    """Never submit real jobs from the tests, even on a submit node."""

    def unreachable():
        raise RuntimeError("Unable to locate local daemon (test)")

    monkeypatch.setattr(condor.htcondor, "Schedd", unreachable)


def write_config(tmp_path: Path, config: dict, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


# ---------------------------------------------------------------------------------------------------------------
# Submit descriptions


def test_submit_description_parses_and_carries_resources(tmp_path):
    resources = CondorResources(gpus=4, cpus=20, memory="128G", disk="100G", max_retries=3,
                                requirements='TARGET.Machine == "calculon21.das-nano.com"',
                                environment={"WANDB_RUN_GROUP": "g", "NOTE": "two words"},
                                extra={"require_gpus": "Capability >= 8.0"})
    sub = build_submit("/usr/bin/python3", ["scripts/train.py", "--config", "a b.yaml"], resources,
                       log=tmp_path / "c.log", output="o.txt", error="e.txt", batch_name="job", initialdir=tmp_path)
    assert sub["request_gpus"] == "4" and sub["request_cpus"] == "20"
    assert sub["request_memory"] == "128G" and sub["request_disk"] == "100G"
    assert sub["max_retries"] == "3" and sub["getenv"] == "true"
    assert sub["retry_until"] == "ExitCode == 3"  # a collapse-guard stop is not retried
    assert sub["requirements"] == 'TARGET.Machine == "calculon21.das-nano.com"'
    assert sub["arguments"] == "\"scripts/train.py --config 'a b.yaml'\""
    assert sub["environment"] == "\"WANDB_RUN_GROUP=g NOTE='two words'\""
    assert sub["require_gpus"] == "Capability >= 8.0"
    reparsed = htcondor.Submit(str(sub))  # the text written to .sub files parses back to the same description
    assert dict(reparsed.items()) == dict(sub.items())


def test_argument_quoting_follows_the_new_syntax():
    assert format_arguments(["a", "b c", "it's", 'say "hi"']) == '"a \'b c\' \'it\'\'s\' \'say ""hi""\'"'
    assert format_arguments(["--x", ""]) == "\"--x ''\""


def test_invalid_resources_name_the_field():
    with pytest.raises(CondorError, match="memory='lots' is not a size"):
        CondorResources(memory="lots").validate()
    with pytest.raises(CondorError, match="gpus must be a non-negative integer"):
        CondorResources(gpus=-1).validate()
    with pytest.raises(CondorError, match=r"unknown keys \['request_ram'\]"):
        CondorResources.from_mapping({"request_ram": "1G"}, CondorResources(), "here")


def test_default_resources_follow_the_gpu_split():
    assert gpu_split(FOUR_GPU).total == 4
    resources = condor.default_resources(FOUR_GPU)
    assert (resources.gpus, resources.cpus, resources.memory) == (4, 4 * 4 + 16, "128G")
    colocate = {"use_vllm": True, "vllm_mode": "colocate"}
    assert gpu_split(colocate).total == 1
    with pytest.raises(ValueError, match="vllm_gpus=2 but no student server"):
        gpu_split({**colocate, "vllm_gpus": 2})
    cpu = {"use_cpu": True, "use_vllm": True, "vllm_mode": "colocate"}  # configs/tiny-cpu.yaml: no GPU asked for
    assert gpu_split(cpu).total == 0 and condor.default_resources(cpu).gpus == 0
    assert gpu_split({**cpu, "trainer_gpus": 1}).total == 1  # the config's own count stands


# ---------------------------------------------------------------------------------------------------------------
# Condor launcher (sweeps) and single jobs


def test_condor_sweep_without_schedd_writes_one_cluster_with_itemdata(tmp_path):
    write_config(tmp_path, FOUR_GPU, "base.yaml")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(textwrap.dedent("""
        name: opd
        base_config: base.yaml
        variants: [{name: grpo, teacher_tau: 0.0}, {name: opd, teacher_tau: 0.3}]
        grid: {learning_rate: [1e-6, 2e-6]}
        condor: {memory: 200G, requirements: 'TARGET.Machine == "node1"'}
        """))
    finished = tmp_path / "runs" / "grpo_learning_rate1e-06"
    finished.mkdir(parents=True)
    (finished / "run_summary.json").write_text("{}")
    lines: list[str] = []
    codes = run_sweep(sweep, launcher="condor", sweep_dir=tmp_path / "runs", printer=lines.append)
    assert list(codes) == ["grpo_learning_rate1e-06", "grpo_learning_rate2e-06", "opd_learning_rate1e-06",
                           "opd_learning_rate2e-06"]
    sub_file = tmp_path / "runs" / "condor" / "sweep.sub"
    assert f"condor_submit {sub_file}" in "\n".join(lines)
    sub = htcondor.Submit(sub_file.read_text())
    items = list(sub.itemdata())
    assert [item["run_name"] for item in items] == list(codes)[1:]  # the finished run is not queued
    assert items[0] == {"run_name": "grpo_learning_rate2e-06", "run_dir": str(tmp_path / "runs" /
                                                                              "grpo_learning_rate2e-06"), "gpus": "4"}
    assert sub["request_gpus"] == "$(gpus)" and sub["request_memory"] == "200G"
    assert sub["request_cpus"] == "32" and sub["requirements"] == 'TARGET.Machine == "node1"'
    assert sub["output"] == "$(run_dir)/train.log"
    assert "--config $(run_dir)/config.yaml --resume --auto-ports" in sub["arguments"]
    assert "WANDB_RUN_GROUP=opd" in sub["environment"]
    assert (tmp_path / "runs" / "opd_learning_rate2e-06" / "config.yaml").is_file()


def test_condor_sweep_submits_to_a_reachable_schedd(tmp_path, monkeypatch):
    submitted = {}

    class FakeResult:
        def cluster(self):
            return 4242

        def num_procs(self):
            return len(submitted["items"])

    class FakeSchedd:
        def submit(self, description, itemdata=None):
            submitted["description"] = str(description)
            submitted["items"] = list(itemdata)
            return FakeResult()

    monkeypatch.setattr(condor.htcondor, "Schedd", FakeSchedd)
    write_config(tmp_path, {"learning_rate": 1e-5}, "base.yaml")
    (tmp_path / "sweep.yaml").write_text("base_config: base.yaml\ngrid: {learning_rate: [1e-5, 2e-5]}\n")
    lines: list[str] = []
    run_sweep(tmp_path / "sweep.yaml", launcher="condor", sweep_dir=tmp_path / "runs", printer=lines.append)
    assert "submitted cluster 4242 (2 jobs)" in "\n".join(lines)
    assert [item["run_name"] for item in submitted["items"]] == ["learning_rate1e-05", "learning_rate2e-05"]
    assert [item["gpus"] for item in submitted["items"]] == ["1", "1"]


def test_condor_sweep_rejects_unknown_condor_keys(tmp_path):
    write_config(tmp_path, {"learning_rate": 1e-5}, "base.yaml")
    (tmp_path / "sweep.yaml").write_text("base_config: base.yaml\ngrid: {lora_r: [8]}\ncondor: {ram: 1G}\n")
    with pytest.raises(SweepError, match=r"sweep.yaml: condor: unknown keys \['ram'\]"):
        run_sweep(tmp_path / "sweep.yaml", launcher="condor", sweep_dir=tmp_path / "runs", printer=lambda _: None)


def test_submit_train_job_dry_run(tmp_path, capsys):
    config = write_config(tmp_path, {**FOUR_GPU, "output_dir": str(tmp_path / "out"), "run_name": "q4"})
    code = submit_main(["train", "--config", str(config), "--memory", "150G", "--requirements", "HasGpu",
                        "--dry-run", "--no-preflight", "--", "--max_steps", "10"])
    assert code == 0
    sub_file = tmp_path / "out" / "condor" / "q4.sub"
    assert f"condor_submit {sub_file}" in capsys.readouterr().out
    sub = htcondor.Submit(sub_file.read_text())
    assert sub["request_gpus"] == "4" and sub["request_cpus"] == "32"  # derived from the config
    assert sub["request_memory"] == "150G" and sub["requirements"] == "HasGpu"  # overridden
    assert sub["arguments"] == f'"-m arc_trl serve --config {config} --resume --auto-ports --max_steps 10"'
    assert sub["executable"] == sys.executable and sub["batch_name"] == "q4" and sub["initialdir"] == str(REPO)
    # the job's command line, run where the job starts, is `arc-trl serve` (shown its plan with --dry-run)
    job = subprocess.run([sub["executable"], *sub["arguments"].strip('"').split(), "--gpus", "0,1,2,3", "--dry-run"],
                         cwd=sub["initialdir"], capture_output=True, text=True, timeout=60, check=False)
    assert job.returncode == 0, job.stderr
    assert f"scripts/train.py --config {config} --max_steps 10" in job.stdout


def test_submit_evaluate_job_without_schedd_writes_sub(tmp_path, capsys):
    out = tmp_path / "eval"
    code = submit_main(["evaluate", "--gpus", "2", "--cpus", "12", "--", "generate", "--model", "m", "--dataset",
                        "arc-agi-1/eval", "--n-predictions", "8", "--output-dir", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "no HTCondor schedd reachable" in printed and f"condor_submit {out}/condor/evaluate.sub" in printed
    sub = htcondor.Submit((out / "condor" / "evaluate.sub").read_text())
    assert sub["request_gpus"] == "2" and sub["request_cpus"] == "12" and sub["request_memory"] == "32G"
    assert sub["arguments"].startswith('"-m arc_trl evaluate generate --model m')


def test_submit_errors_are_reported(tmp_path, capsys):
    assert submit_main(["evaluate", "--dry-run"]) == 2
    assert "give the `arc-trl evaluate` arguments after `--`" in capsys.readouterr().out
    config = write_config(tmp_path, FOUR_GPU)
    assert submit_main(["train", "--config", str(config), "--memory", "many", "--dry-run"]) == 2
    assert "memory='many' is not a size" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------------
# Server wrapper: plan


def test_wrapper_dry_run_plan_for_the_four_gpu_layout(tmp_path):
    config = write_config(tmp_path, {**FOUR_GPU, "vllm_server_args": "--max_model_len 12000"})
    result = subprocess.run([sys.executable, "-m", "arc_trl", "serve", "--config", str(config),
                             "--gpus", "0,1,2,3", "--dry-run", "--", "--max_steps", "5"],
                            cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "GPUs visible: 0,1,2,3 (from --gpus); needed: 4 = student vLLM 2 + trainer 1 + teacher vLLM 1"
    bin_dir = Path(sys.executable).parent
    assert lines[1:] == [
        "[student-vllm] CUDA_VISIBLE_DEVICES=0,1",
        (f"    {bin_dir}/trl vllm-serve --model Qwen/Qwen3-8B --data-parallel-size 2 --tensor-parallel-size 1 "
         "--port 8000 --seed 42 --max_model_len 12000"),
        "    health: http://127.0.0.1:8000/health",
        "[trainer] CUDA_VISIBLE_DEVICES=2",
        f"    {bin_dir}/accelerate launch --num_processes 1 {REPO}/scripts/train.py --config {config} --max_steps 5",
        "[teacher-vllm] CUDA_VISIBLE_DEVICES=3",
        f"    {bin_dir}/vllm serve Qwen/Qwen3-32B --port 8001 --tensor-parallel-size 1",
        "    health: http://127.0.0.1:8001/health",
    ]


def test_plan_variants_and_errors(tmp_path):
    path = tmp_path / "c.yaml"
    plan = build_plan({**FOUR_GPU, "vllm_gpus": 4, "vllm_tensor_parallel_size": 2, "trainer_gpus": 2,
                       "teacher_gpus": 2}, path, [str(i) for i in range(8)])
    student, teacher = plan.servers
    assert student.gpus == ["0", "1", "2", "3"] and plan.trainer.gpus == ["4", "5"] and teacher.gpus == ["6", "7"]
    assert student.command[student.command.index("--data-parallel-size") + 1] == "2"
    assert "--multi_gpu" in plan.trainer.command and plan.trainer.command[3] == "2"  # --num_processes 2
    assert teacher.command[teacher.command.index("--tensor-parallel-size") + 1] == "2"

    auto = build_plan(FOUR_GPU, path, ["0", "1", "2", "3"], auto_ports=True)
    ports = [spec.command[spec.command.index("--port") + 1] for spec in auto.servers]
    trainer = auto.trainer.command
    assert trainer[trainer.index("--vllm_server_base_url") + 1] == f"http://127.0.0.1:{ports[0]}"
    assert trainer[trainer.index("--teacher_server_url") + 1] == f"http://127.0.0.1:{ports[1]}"
    used = ports + [trainer[trainer.index(flag) + 1] for flag in ("--vllm_group_port", "--main_process_port")]
    assert len(set(used)) == 4

    cpu = build_plan({"learning_rate": 1e-5}, path, [], gpu_source="none")
    assert cpu.servers == [] and cpu.trainer.gpus is None

    with pytest.raises(PlanError, match="needs 4 GPUs .* but only 2 are visible"):
        build_plan(FOUR_GPU, path, ["0", "1"])
    with pytest.raises(PlanError, match="vllm_gpus=3 is not a multiple of vllm_tensor_parallel_size=2"):
        build_plan({**FOUR_GPU, "vllm_gpus": 3, "vllm_tensor_parallel_size": 2}, path, list("0123456"))
    with pytest.raises(PlanError, match="points at another host"):
        build_plan({**FOUR_GPU, "teacher_server_url": "http://gpu-node-7:8001"}, path, list("0123"))
    with pytest.raises(PlanError, match="both use port 8000"):
        build_plan({**FOUR_GPU, "teacher_server_url": "http://localhost:8000"}, path, list("0123"))
    with pytest.raises(PlanError, match="teacher_gpus=1 but teacher_backend is not 'server'"):
        build_plan({**FOUR_GPU, "teacher_backend": "base"}, path, list("0123"))


def test_the_student_server_samples_with_the_training_seed(tmp_path):
    """vLLM serves with seed 0 unless told: every seed of a server layout sampled the same stream."""
    path = tmp_path / "c.yaml"

    def seed_of(config: dict, train_args: list[str] | None = None) -> list[str]:
        command = build_plan(config, path, list("0123"), train_args=train_args).servers[0].command
        return [command[i + 1] for i, arg in enumerate(command) if arg == "--seed"] + [
            arg for arg in command if arg.startswith("--seed=")]

    assert seed_of({**FOUR_GPU, "seed": 1}) == ["1"] and seed_of({**FOUR_GPU, "seed": 2}) == ["2"]
    assert seed_of(FOUR_GPU) == ["42"]  # TrainingArguments' default, as the trainer's
    assert seed_of({**FOUR_GPU, "seed": 1}, ["--seed", "3"]) == ["3"]  # the command line wins, as in the trainer
    assert seed_of({**FOUR_GPU, "vllm_server_args": "--seed=7"}) == ["--seed=7"]  # the server's own, once


def test_wrapper_resume_skips_finished_and_resumes_latest(tmp_path, capsys):
    out = tmp_path / "out"
    config = write_config(tmp_path, {"learning_rate": 1e-5, "output_dir": str(out)})
    for step in (50, 100):
        (out / f"checkpoint-{step}").mkdir(parents=True)
        (out / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    assert wrapper_main(["--config", str(config), "--gpus", "0", "--resume", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert f"--resume_from_checkpoint {out}/checkpoint-100" in printed
    (out / "run_summary.json").write_text("{}")
    assert wrapper_main(["--config", str(config), "--resume"]) == 0
    assert "already holds run_summary.json: nothing to do" in capsys.readouterr().out
    assert wrapper_main(["--config", str(tmp_path / "missing.yaml"), "--dry-run"]) == 2
    assert "missing.yaml not found" in capsys.readouterr().out


def test_plan_defaults_match_trl():
    from trl import GRPOConfig

    from arc_trl.config import ArcConfig
    from arc_trl.launch.launch_config import LAUNCH_DEFAULTS, known_config_keys
    from arc_trl.launch.server_plan import DEFAULT_SEED, DEFAULT_VLLM_SERVER_PORT
    from arc_trl.config.script_args import ArcScriptArguments

    grpo = {f.name: f.default for f in GRPOConfig.__dataclass_fields__.values()}
    assert grpo["vllm_server_port"] == DEFAULT_VLLM_SERVER_PORT and grpo["vllm_mode"] == "colocate"
    assert grpo["seed"] == DEFAULT_SEED
    assert grpo["use_vllm"] is False and grpo["vllm_tensor_parallel_size"] == 1
    # scripts/train.py accepts the launch keys (and ignores them): script-side fields with the launchers' defaults,
    # never keys of the trainer's ArcConfig; the sweep's key check knows them
    script = {f.name: f.default for f in ArcScriptArguments.__dataclass_fields__.values()}
    assert {key: script[key] for key in LAUNCH_DEFAULTS} == LAUNCH_DEFAULTS
    assert not set(LAUNCH_DEFAULTS) & set(ArcConfig.__dataclass_fields__)
    assert set(script) | set(ArcConfig.__dataclass_fields__) | {"env"} <= known_config_keys()


# ---------------------------------------------------------------------------------------------------------------
# Server wrapper: processes (fake servers answering /health, fake trainers)

FAKE_SERVER = textwrap.dedent(
    """
    import http.server, os, sys, pathlib
    port, pid_file, mode = int(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
    pid_file.write_text(str(os.getpid()))
    print("devices", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
    if mode == "crash":
        print("CUDA out of memory (fake)", flush=True)
        sys.exit(7)
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
    """
)

FAKE_TRAINER = textwrap.dedent(
    """
    import os, pathlib, sys, time
    marker, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
    marker.write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "") + " " + os.environ.get("FROM_CONFIG", ""))
    if mode == "sleep":
        time.sleep(60)
    sys.exit(int(mode))
    """
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def fake_plan(tmp_path: Path, trainer_mode: str, server_mode: str = "ok") -> tuple[LaunchPlan, Path]:
    from arc_trl.launch.server_plan import PortPicker

    (tmp_path / "server.py").write_text(FAKE_SERVER)
    (tmp_path / "trainer.py").write_text(FAKE_TRAINER)
    port = PortPicker()()
    server = ProcessSpec("student-vllm", [sys.executable, str(tmp_path / "server.py"), str(port),
                                         str(tmp_path / "server.pid"), server_mode], ["0", "1"],
                         f"http://127.0.0.1:{port}/health")
    trainer = ProcessSpec("trainer", [sys.executable, str(tmp_path / "trainer.py"), str(tmp_path / "trainer.txt"),
                                      trainer_mode], ["2"])
    return LaunchPlan(gpu_split({}), ["0", "1", "2"], "test", [server], trainer, startup_timeout=20), tmp_path


def test_run_plan_starts_servers_waits_for_health_and_stops_them(tmp_path):
    plan, _ = fake_plan(tmp_path, trainer_mode="5")
    lines: list[str] = []
    code = run_plan(plan, tmp_path / "logs", {"FROM_CONFIG": "yes"}, printer=lines.append, poll_s=0.1)
    assert code == 5  # the trainer's exit code
    assert (tmp_path / "trainer.txt").read_text() == "2 yes"  # trainer GPU slice + the config's env block
    assert "devices 0,1" in (tmp_path / "logs" / "student-vllm.log").read_text()
    assert any("student-vllm is healthy" in line for line in lines)
    assert not alive(int((tmp_path / "server.pid").read_text()))


def test_run_plan_reports_a_server_that_dies_before_healthy(tmp_path):
    plan, _ = fake_plan(tmp_path, trainer_mode="0", server_mode="crash")
    lines: list[str] = []
    assert run_plan(plan, tmp_path / "logs", printer=lines.append, poll_s=0.1) == 1
    assert "student-vllm exited with code 7 before becoming healthy" in lines[-1]
    assert "CUDA out of memory (fake)" in lines[-1]
    assert not (tmp_path / "trainer.txt").exists()


def test_sigterm_stops_trainer_and_servers(tmp_path):
    plan, _ = fake_plan(tmp_path, trainer_mode="sleep")
    (tmp_path / "plan.pkl").write_bytes(pickle.dumps(plan))
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import pickle, sys
        sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from arc_trl.launch.server_runner import run_plan
        plan = pickle.loads(Path({str(tmp_path / "plan.pkl")!r}).read_bytes())
        sys.exit(run_plan(plan, Path({str(tmp_path / "logs")!r}), poll_s=0.1))
        """))
    process = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, cwd=REPO)
    deadline = time.monotonic() + 30
    while not (tmp_path / "trainer.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "trainer.txt").exists(), process.communicate(timeout=5)[0]
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=30)[0]
    assert process.returncode == 128 + signal.SIGTERM, output
    assert "received signal SIGTERM: stopping the trainer and servers" in output
    assert not alive(int((tmp_path / "server.pid").read_text()))


# ---------------------------------------------------------------------------------------------------------------
# Server wrapper: command-line overrides, ports, the trainer's log


def test_command_line_model_paths_reach_the_servers(tmp_path):
    """A hub id in the YAML, a local path on the command line: the servers load what the trainer is told to."""
    plan = build_plan(FOUR_GPU, tmp_path / "c.yaml", list("0123"),
                      train_args=["--model_name_or_path", "/models/student", "--teacher_model=/models/teacher",
                                  "--vllm_gpus", "2", "--max_steps", "3"])
    student, teacher = plan.servers
    assert student.command[student.command.index("--model") + 1] == "/models/student"
    assert teacher.command[teacher.command.index("serve") + 1] == "/models/teacher"
    assert plan.trainer.command[-6:] == ["--model_name_or_path", "/models/student", "--teacher_model=/models/teacher",
                                         "--vllm_gpus", "2", "--max_steps", "3"][-6:]


def test_plan_lists_every_port_it_needs(tmp_path):
    plan = build_plan({**FOUR_GPU, "trainer_gpus": 2, "teacher_gpus": 1}, tmp_path / "c.yaml", list("01234"))
    assert plan.ports == {"student-vllm (--port)": 8000, "teacher-vllm (--port)": 8001,
                          "vllm_group_port (the NCCL weight-sync group)": 51216,
                          "main_process_port (accelerate's rendezvous, MASTER_PORT)": 29500}
    colocated = build_plan({"trainer_gpus": 2}, tmp_path / "c.yaml", ["0", "1"])  # two colocated runs collide here
    assert colocated.ports == {"main_process_port (accelerate's rendezvous, MASTER_PORT)": 29500}
    auto = build_plan({"trainer_gpus": 2}, tmp_path / "c.yaml", ["0", "1"], auto_ports=True)
    assert auto.ports["main_process_port (accelerate's rendezvous, MASTER_PORT)"] != 29500


def test_auto_ports_pin_a_colocated_single_process_runs_master_port_in_its_environment(tmp_path, monkeypatch):
    """Machine 2_h100x4_2026-11-28a (results/gpu_fp8/): four colocated runs started at once; accelerate exports
    --main_process_port as MASTER_PORT only for several processes, so TRL's vLLM rendezvous took the first free of
    29500, ... in each, and one died with EADDRINUSE on 29500. The picked port must reach the process's env."""
    from arc_trl.launch.server_runner import process_env

    monkeypatch.setenv("MASTER_PORT", "29500")  # an inherited value does not win either
    for use_accelerate in (True, False):
        plan = build_plan({}, tmp_path / "c.yaml", ["0"], auto_ports=True, use_accelerate=use_accelerate)
        port = plan.trainer.env["MASTER_PORT"]
        assert port != "29500" and process_env(plan.trainer, {"MASTER_PORT": "1234"})["MASTER_PORT"] == port
        assert plan.ports["main_process_port (accelerate's rendezvous, MASTER_PORT)"] == int(port)  # checked free
        if use_accelerate:
            command = plan.trainer.command
            assert command[command.index("--main_process_port") + 1] == port
        assert f"MASTER_PORT={port}" in plan.trainer.describe()
    assert build_plan({}, tmp_path / "c.yaml", ["0"]).trainer.env == {}  # without --auto-ports, TRL's own choice


def test_a_taken_port_stops_the_run_before_any_process_starts(tmp_path):
    import socket

    plan, _ = fake_plan(tmp_path, trainer_mode="0")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        plan.ports = {"student-vllm (--port)": port}
        lines: list[str] = []
        assert run_plan(plan, tmp_path / "logs", printer=lines.append, poll_s=0.1) == 1
    assert f"{port} (student-vllm (--port))" in lines[-1] and "nothing started" in lines[-1]
    assert not (tmp_path / "server.pid").exists() and not (tmp_path / "trainer.txt").exists()


def test_a_failed_trainer_is_named_with_its_log(tmp_path):
    plan, _ = fake_plan(tmp_path, trainer_mode="3")
    lines: list[str] = []
    assert run_plan(plan, tmp_path / "logs", printer=lines.append, poll_s=0.1) == 3
    log = tmp_path / "logs" / "trainer.log"
    assert log.exists() and f"trainer exited with code 3; last lines of {log}" in lines[-1]
    assert not alive(int((tmp_path / "server.pid").read_text()))


def test_the_trainer_is_told_where_each_server_logs(tmp_path):
    """A server that stops answering is named in the trainer's error with its log (arc_trl/integrations/vllm_server_client.py):
    the runner tells the trainer where each server's log is, by the server's base URL."""
    import json

    from arc_trl.integrations.vllm_server_client import SERVER_LOGS_ENV

    plan, _ = fake_plan(tmp_path, trainer_mode="0")
    dump = tmp_path / "env.py"
    dump.write_text(f"import os, pathlib; pathlib.Path({str(tmp_path / 'env.json')!r}).write_text("
                    f"os.environ[{SERVER_LOGS_ENV!r}])")
    plan.trainer.command = [sys.executable, str(dump)]
    assert run_plan(plan, tmp_path / "logs", printer=lambda line: None, poll_s=0.1) == 0
    url = plan.servers[0].health_url.removesuffix("/health")
    assert json.loads((tmp_path / "env.json").read_text()) == {url: str((tmp_path / "logs" / "student-vllm.log")
                                                                          .resolve())}


def test_a_stopped_process_group_is_stopped_at_once():
    """A SIGSTOPped server (the drill of a hung one) handles the runner's SIGTERM at once (a SIGCONT follows it),
    not after the 30 s grace that ends in SIGKILL."""
    from arc_trl.launch.processes import start, stop

    # a handler of its own, as vLLM's server has (a stopped process with SIGTERM's default action dies at once anyway)
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(5)); print(1, flush=True); " \
           "time.sleep(60)"
    process = start([sys.executable, "-c", code], dict(os.environ), stdout=subprocess.PIPE)
    assert process.stdout.readline() == b"1\n"  # its handler is in place
    os.killpg(process.pid, signal.SIGSTOP)
    started = time.monotonic()
    stop(process, grace_s=20.0)
    assert time.monotonic() - started < 5.0 and process.returncode == 5  # its handler ran: SIGTERM, not SIGKILL


def test_a_port_left_in_time_wait_by_a_stopped_run_is_free():
    """vLLM's server and torch's rendezvous bind with SO_REUSEADDR: a port a stopped run left in TIME_WAIT is free
    for them, so the check must not refuse it (a resumed run would be turned away for a minute)."""
    import socket

    from arc_trl.launch.server_plan import port_in_use

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    assert port_in_use(port)  # listening
    accepted.close()  # the server side closes first: its end of the connection waits in TIME_WAIT
    time.sleep(0.2)
    client.close()
    listener.close()
    assert not port_in_use(port)


def test_bare_boolean_flags_and_repeated_ports_read_as_the_trainer_reads_them(tmp_path):
    config = {**FOUR_GPU, "use_vllm": False, "teacher_backend": "none", "teacher_gpus": 0}
    plan = build_plan(config, tmp_path / "c.yaml", list("0123"),
                      train_args=["--use_vllm", "--vllm_group_port", "5000", "--vllm_group_port", "5001"])
    assert [spec.role for spec in plan.servers] == ["student-vllm"]  # a bare --use_vllm is true
    assert plan.ports["vllm_group_port (the NCCL weight-sync group)"] == 5001  # argparse keeps the last


def test_server_arguments_given_on_the_command_line_reach_the_server(tmp_path):
    """`--vllm_server_args "--max_model_len 2048"`: argparse reads a word with a space as a value even when it starts
    with "--", so the trainer has it; the plan must put it on the server's command too (it was dropped)."""
    plan = build_plan({**FOUR_GPU, "teacher_backend": "none", "teacher_gpus": 0}, tmp_path / "c.yaml", list("0123"),
                      train_args=["--vllm_server_args", "--max_model_len 2048 --gpu_memory_utilization 0.5"])
    student, = plan.servers
    assert student.command[-4:] == ["--max_model_len", "2048", "--gpu_memory_utilization", "0.5"]


def test_the_trainer_output_is_drained_even_when_the_console_cannot_take_it(tmp_path, monkeypatch):
    """A trainer printing more than a pipe holds, while writes to our stdout fail: the run still ends, and the log
    has every line."""
    plan, _ = fake_plan(tmp_path, trainer_mode="0")
    chatty = tmp_path / "chatty.py"
    chatty.write_text("import sys\nfor i in range(20000):\n    print(f'line {i:06d} ' + 'x' * 20)\nsys.exit(4)\n")
    plan.trainer.command = [sys.executable, str(chatty)]

    class BrokenConsole:
        class buffer:  # noqa: N801 - stands in for sys.stdout.buffer
            @staticmethod
            def write(data):
                raise BrokenPipeError("console gone")

        @staticmethod
        def flush():
            pass

    monkeypatch.setattr(sys, "stdout", BrokenConsole())
    lines: list[str] = []
    assert run_plan(plan, tmp_path / "logs", printer=lines.append, poll_s=0.1) == 4
    text = (tmp_path / "logs" / "trainer.log").read_text()
    assert text.count("\n") == 20000 and text.splitlines()[-1].startswith("line 019999")
