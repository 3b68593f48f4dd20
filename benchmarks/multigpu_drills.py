"""Failure drills of a multi-GPU run (`arc-trl serve`), on two GPUs (docs/multigpu.md):

    python benchmarks/multigpu_drills.py --model /tmp/arc-gpu/qwen3-0.6b --gpus 2,3 --out drills.json [--only NAME]

- student-server-killed: the student's `trl vllm-serve` SIGKILLed while a step generates (server mode, 1 + 1 GPUs);
- student-server-stopped: the same server SIGSTOPped (its whole process group: it accepts connections and answers
  nothing, a hung server), the run with `--vllm_request_timeout_s 60`: the trainer must fail naming the server and
  its log within the deadline, and the runner stop the stopped server (its CPU drill: benchmarks/hung_server_drill.py);
- teacher-server-killed: the teacher's `vllm serve` SIGKILLed mid-run (colocated student, teacher server);
- trainer-rank-killed: trainer rank 1 of two SIGKILLed (colocated data parallel on both GPUs);
- port-taken: the student server's port already held; master-port-taken: accelerate's 29500 held (two colocated
  runs on one machine): both must stop before any process starts.

Each run is a small real one (the model given, short turns forced full, LoRA), started in a session of its own with
ARC_DRILL=<name> in its environment (every process it starts inherits it). A drill records how long the run took to
stop after the kill, its exit code, the processes left carrying the marker, what the run said, and the drill GPUs'
memory before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--max_steps", "200", "--max_turns", "2", "--max_tokens_per_turn", "64", "--max_completion_length", "256",
         "--num_generations", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
         "--benchmark_full_turns", "true", "--report_to", "none", "--save_strategy", "no", "--collapse_guard", "off",
         "--vllm_max_model_length", "6144", "--max_prompt_tokens", "4096",
         "--async_rollouts", "0"]  # the drills ran synchronously (the server config is asynchronous since machine 6)
SERVER = "configs/qwen3-8b-2gpu-server.yaml"
STOPPED_TIMEOUT_S = 60  # student-server-stopped: the run's vllm_request_timeout_s
COLOCATE = "configs/qwen3-8b-2gpu-colocate.yaml"


def drill_args(name: str, model: str, port: int | None = None) -> tuple[str, list[str], list[str]]:
    """(config, runner flags, training flags) of a drill's run."""
    small = ["--model_name_or_path", model, *SMALL, "--output_dir", f"/tmp/arc-gpu/drills/{name}"]
    if name == "student-server-killed":
        return SERVER, ["--auto-ports"], small
    if name == "student-server-stopped":
        return SERVER, ["--auto-ports"], [*small, "--vllm_request_timeout_s", str(STOPPED_TIMEOUT_S)]
    if name == "port-taken":
        return SERVER, [], [*small, "--vllm_server_base_url", f"http://127.0.0.1:{port}"]
    if name == "teacher-server-killed":
        teacher = ["--vllm_mode", "colocate", "--vllm_gpus", "0", "--vllm_gpu_memory_utilization", "0.35",
                   "--teacher_backend", "server", "--teacher_model", model, "--teacher_server_url",
                   "http://localhost:8001", "--teacher_gpus", "1", "--teacher_tau", "0.3"]
        return SERVER, ["--auto-ports"], [*small, *teacher]
    if name in ("trainer-rank-killed", "master-port-taken"):
        runner = ["--auto-ports"] if name == "trainer-rank-killed" else []
        return COLOCATE, runner, [*small, "--vllm_gpu_memory_utilization", "0.35"]
    raise ValueError(name)


def marked(name: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries ARC_DRILL=name."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            if f"ARC_DRILL={name}".encode() not in environ:
                continue
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found.append((int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]))
        except OSError:
            continue
    return found


def gpu_used_mib(gpus: list[str]) -> dict[str, int]:
    query = ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"]
    try:
        lines = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.splitlines()
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return {}
    used = {}
    for line in lines:
        index, mib = (part.strip() for part in line.split(","))
        if index in gpus:
            used[index] = int(mib)
    return used


def target_pid(name: str, log: Path) -> int | None:
    """The process the drill kills: a server's pid as the runner printed it, or trainer rank 1."""
    if name in ("student-server-killed", "student-server-stopped", "teacher-server-killed"):
        role = "student-vllm" if name.startswith("student") else "teacher-vllm"
        for line in log.read_text(errors="replace").splitlines():
            if f"started {role} (pid " in line:
                return int(line.split("(pid ")[1].split(")")[0])
        return None
    for pid, command in marked(name):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"LOCAL_RANK=1" in environ and "train" in command:
            return pid
    return None


def run_drill(name: str, model: str, gpus: list[str], work: Path, step_timeout_s: float = 600) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"{name}.log"
    holder = None
    port = None
    if name in ("port-taken", "master-port-taken"):
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("0.0.0.0", 29500 if name == "master-port-taken" else 0))
        holder.listen()
        port = holder.getsockname()[1]
    config, runner, train = drill_args(name, model, port)
    command = [sys.executable, "-m", "arc_trl", "serve", "--config", config, "--gpus", ",".join(gpus), *runner, "--",
               *train]
    before = gpu_used_mib(gpus)
    env = {**os.environ, "ARC_DRILL": name, "NCCL_NVLS_ENABLE": "0", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    killed_at = None
    result: dict = {"failure": name, "command": command}
    try:
        if holder is None:  # wait for the first step, then kill the target while the next one runs
            deadline = time.monotonic() + step_timeout_s
            stepped = False
            while process.poll() is None and time.monotonic() < deadline and not stepped:
                stepped = "'reward'" in log.read_text(errors="replace")
                time.sleep(2)
            time.sleep(3)  # into the next step's generation
            pid = target_pid(name, log)
            result["killed_pid"] = pid
            if not stepped or pid is None or process.poll() is not None:
                result["error"] = ("no step logged before the kill" if not stepped else
                                   "no target process" if pid is None else "the run had ended before the kill")
            elif name == "student-server-stopped":  # the server and its engine processes (its own process group)
                os.killpg(os.getpgid(pid), signal.SIGSTOP)
                killed_at = time.monotonic()
            else:
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
        try:
            code = process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            code = None
        stopped = time.monotonic()
    finally:
        if holder is not None:
            holder.close()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    time.sleep(5)  # the driver's release of a killed process's memory
    left = marked(name)
    after = gpu_used_mib(gpus)
    text = log.read_text(errors="replace").splitlines()
    said = [line for line in text if "[run_with_servers]" in line and ("error" in line or "exited" in line)]
    said += [line for line in text if "ServerUnresponsive" in line][-1:]  # the trainer's error naming the server
    result.update({
        "exit_code": code,
        "stopped_s": round(stopped - (killed_at or started), 1),
        "since": "kill" if killed_at else "start",
        "leftover_processes": len(left),
        "leftover": left,
        "gpu_used_mib_before": before,
        "gpu_used_mib_after": after,
        "said": said[-3:],
        "log_tail": text[-15:],
    })
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--gpus", default="0,1")
    parser.add_argument("--work", type=Path, default=Path("/tmp/arc-gpu/drills"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", help="comma-separated drills")
    args = parser.parse_args(argv)
    names = ["port-taken", "master-port-taken", "student-server-killed", "student-server-stopped",
             "teacher-server-killed", "trainer-rank-killed"]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    results = []
    for name in names:
        print(f"== drill {name}", flush=True)
        results.append(run_drill(name, args.model, args.gpus.split(","), args.work))
        r = results[-1]
        print(f"   exit {r['exit_code']} after {r['stopped_s']} s (since {r['since']}), "
              f"{r['leftover_processes']} left; {r['said']}", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"drills": results}, indent=1))
    ok = all(r["exit_code"] not in (0, None) and r["leftover_processes"] == 0 and "error" not in r for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
