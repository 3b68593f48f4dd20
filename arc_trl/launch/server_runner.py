"""Run a training config with the vLLM servers it needs (the logic of `arc-trl serve`).

1. read the config, lay it out on the job's GPUs (server_plan.py); stop before starting anything when a port the
   plan needs is taken (a server's, the weight-sync group's, accelerate's rendezvous),
2. start the student server (`trl vllm-serve`) and/or the teacher server (`vllm serve`), logs in
   `<output_dir>/server_logs/`, and wait for their health endpoints,
3. run `accelerate launch ... scripts/train.py --config CONFIG [extra args]` with its output on our stdout and in
   `<output_dir>/server_logs/trainer.log`, each server's log named in its environment (`ARC_TRL_SERVER_LOGS`: a
   server that stops answering is named in the trainer's error with its log),
4. stop every process at the end, also on failure, on a crashed server or trainer rank, on SIGTERM (HTCondor) or
   Ctrl-C; a failure names the process and the last lines of its log.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from arc_trl.launch.processes import Terminated, signals_as_exceptions, start, stop
from arc_trl.launch.run_state import FINISHED, RESUMABLE, run_state
from arc_trl.launch.server_plan import (
    HEALTH_PATH,
    TRAIN_SCRIPT,
    LaunchPlan,
    PlanError,
    ProcessSpec,
    build_plan,
    port_in_use,
)
from arc_trl.integrations.vllm_server_client import SERVER_LOGS_ENV

PREFIX = "[run_with_servers]"


class ServerError(RuntimeError):
    """A server died or did not become healthy in time."""


def parse_gpu_list(text: str) -> list[str]:
    return [token.strip() for token in text.split(",") if token.strip() and token.strip() != "-1"]


def visible_gpus(explicit: str | None = None) -> tuple[list[str], str]:
    """The job's GPUs: --gpus, else CUDA_VISIBLE_DEVICES (set by HTCondor for the GPUs it assigned), else the
    indices listed by nvidia-smi, else none."""
    if explicit is not None:
        return parse_gpu_list(explicit), "--gpus"
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return parse_gpu_list(os.environ["CUDA_VISIBLE_DEVICES"]), "CUDA_VISIBLE_DEVICES"
    try:
        result = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=60, check=False)
        if result.returncode == 0:
            return parse_gpu_list(",".join(result.stdout.split())), "nvidia-smi"
    except (FileNotFoundError, subprocess.TimeoutExpired):
        pass
    return [], "no CUDA_VISIBLE_DEVICES and no nvidia-smi"


def load_config(path: Path) -> dict:
    if not path.is_file():
        raise PlanError(f"config file {path} not found")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise PlanError(f"{path} is not valid YAML: {error}") from error
    if not isinstance(config, dict):
        raise PlanError(f"{path} must contain a YAML mapping of training keys")
    return config


def _arg_value(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def process_env(spec: ProcessSpec, config_env: dict) -> dict[str, str]:
    env = {**os.environ, **{str(k): str(v) for k, v in config_env.items()}, "PYTHONUNBUFFERED": "1"}
    if spec.cuda_visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = spec.cuda_visible_devices
    return {**env, **spec.env}


def _log_tail(path: Path, lines: int = 30) -> str:
    if not path.is_file():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_healthy(servers: list[tuple[ProcessSpec, subprocess.Popen, Path]], timeout_s: float,
                 printer: Callable[[str], None] = print, poll_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(servers)
    while pending:
        for entry in list(pending):
            spec, process, log = entry
            if process.poll() is not None:
                raise ServerError(f"{spec.role} exited with code {process.returncode} before becoming healthy; "
                                  f"last lines of {log}:\n{_log_tail(log)}")
            if _healthy(spec.health_url):
                printer(f"{PREFIX} {spec.role} is healthy ({spec.health_url})")
                pending.remove(entry)
        if pending and time.monotonic() > deadline:
            names = ", ".join(spec.role for spec, _, _ in pending)
            logs = "\n".join(f"--- {log}\n{_log_tail(log)}" for _, _, log in pending)
            raise ServerError(f"{names} not healthy after {timeout_s:.0f} s (server_startup_timeout)\n{logs}")
        if pending:
            time.sleep(poll_s)


def taken_ports(plan: LaunchPlan) -> list[str]:
    """The plan's ports that something on this machine already holds, each with what needed it."""
    return [f"{port} ({what})" for what, port in plan.ports.items() if port_in_use(port)]


def _tee(stream, log) -> threading.Thread:
    """Copy a process's output, line by line, to our stdout and to the open file `log` (a thread that ends with the
    stream). It never stops reading before the stream ends, whatever fails to be written: a full pipe would block
    the process on its next print."""

    def write(target, line: bytes) -> bool:
        try:
            target.write(line)
            target.flush()
            return True
        except (OSError, ValueError, AttributeError):
            return False

    def copy() -> None:
        console, to_log = getattr(sys.stdout, "buffer", None), True
        for line in iter(stream.readline, b""):
            to_log = to_log and write(log, line)
            console = console if console is not None and write(console, line) else None
        log.close()

    thread = threading.Thread(target=copy, name="trainer-output", daemon=True)
    thread.start()
    return thread


def run_plan(plan: LaunchPlan, log_dir: Path, config_env: dict | None = None,
             printer: Callable[[str], None] = print, poll_s: float = 2.0) -> int:
    """Execute `plan`; returns the trainer's exit code (1 for a server failure or a taken port, 128+N when stopped by
    signal N)."""
    config_env = config_env or {}
    if busy := taken_ports(plan):
        printer(f"{PREFIX} error: port(s) already in use, nothing started: {', '.join(busy)}; stop what holds them, "
                "set other ports in the config, or pass --auto-ports")
        return 1
    started: list[subprocess.Popen] = []
    servers: list[tuple[ProcessSpec, subprocess.Popen, Path]] = []
    try:
        with signals_as_exceptions():
            for spec in plan.servers:
                log_dir.mkdir(parents=True, exist_ok=True)
                log = log_dir / f"{spec.role}.log"
                with open(log, "ab") as handle:
                    process = start(spec.command, process_env(spec, config_env), stdout=handle)
                started.append(process)
                servers.append((spec, process, log))
                printer(f"{PREFIX} started {spec.role} (pid {process.pid}) on GPUs "
                        f"{spec.cuda_visible_devices or '-'}; log: {log}")
            wait_healthy(servers, plan.startup_timeout, printer, poll_s)
            sys.stdout.flush()
            log_dir.mkdir(parents=True, exist_ok=True)
            trainer_log = log_dir / "trainer.log"
            log = open(trainer_log, "ab")  # noqa: SIM115  closed by the copying thread at the output's end
            # the trainer names a server that stops answering with its log (arc_trl/integrations/vllm_server_client.py)
            logs = {spec.health_url.removesuffix(HEALTH_PATH): str(log.resolve()) for spec, _, log in servers
                    if spec.health_url}
            trainer_env = {**process_env(plan.trainer, config_env), SERVER_LOGS_ENV: json.dumps(logs)}
            trainer = start(plan.trainer.command, trainer_env, stdout=subprocess.PIPE)
            started.append(trainer)
            copier = _tee(trainer.stdout, log)
            while (code := trainer.poll()) is None:
                for spec, process, log in servers:
                    if process.poll() is not None:
                        raise ServerError(f"{spec.role} died during training (exit {process.returncode}); last lines"
                                          f" of {log}:\n{_log_tail(log)}")
                time.sleep(poll_s)
            copier.join(timeout=10)
            if code:
                printer(f"{PREFIX} error: trainer exited with code {code}; last lines of {trainer_log}:\n"
                        f"{_log_tail(trainer_log)}")
            else:
                printer(f"{PREFIX} trainer exited with code {code}")
            return code
    except ServerError as error:
        printer(f"{PREFIX} error: {error}")
        return 1
    except Terminated as stopped:
        printer(f"{PREFIX} {stopped}: stopping the trainer and servers")
        return 128 + stopped.signum
    finally:
        for process in reversed(started):
            stop(process)


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Run scripts/train.py with the vLLM servers its config needs (student `trl vllm-serve`, teacher "
        "`vllm serve`) on slices of the job's GPUs. Arguments not listed here are passed on to scripts/train.py.",
        epilog="example: arc-trl serve --config configs/qwen3-8b-4gpu.yaml --dry-run",
    )
    parser.add_argument("--config", required=True, type=Path, help="training YAML (as for scripts/train.py)")
    parser.add_argument("--gpus", help="comma-separated GPU ids to use (default: CUDA_VISIBLE_DEVICES/nvidia-smi)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan (commands and GPUs) and exit")
    parser.add_argument("--resume", action="store_true",
                        help="exit 0 if output_dir holds run_summary.json; resume from its latest checkpoint if any")
    parser.add_argument("--auto-ports", action="store_true",
                        help="pick free ports for servers/NCCL/accelerate (several jobs on one machine)")
    parser.add_argument("--no-accelerate", action="store_true", help="run `python scripts/train.py` (1 process)")
    parser.add_argument("--train-script", type=Path, default=TRAIN_SCRIPT, help=f"default: {TRAIN_SCRIPT}")
    return parser


def main(argv: list[str] | None = None, printer: Callable[[str], None] = print) -> int:
    args, train_args = build_arg_parser().parse_known_args(argv)
    if train_args[:1] == ["--"]:
        train_args = train_args[1:]
    try:
        config_path = args.config.resolve()
        config = load_config(config_path)
        output_dir = Path(_arg_value(train_args, "--output_dir") or config.get("output_dir") or "trainer_output")
        if args.resume:
            state = run_state(output_dir)
            if state.status == FINISHED:
                printer(f"{PREFIX} {output_dir} already holds run_summary.json: nothing to do")
                return 0
            if state.status == RESUMABLE and _arg_value(train_args, "--resume_from_checkpoint") is None:
                printer(f"{PREFIX} resuming from {state.checkpoint}")
                train_args += ["--resume_from_checkpoint", str(state.checkpoint)]
        gpus, source = visible_gpus(args.gpus)
        plan = build_plan(config, config_path, gpus, source, train_args, args.train_script.resolve(),
                          use_accelerate=not args.no_accelerate, auto_ports=args.auto_ports)
    except PlanError as error:
        printer(f"{PREFIX} error: {error}")
        return 2
    printer(plan.describe())
    if args.dry_run:
        return 0
    env = config.get("env") if isinstance(config.get("env"), dict) else {}
    return run_plan(plan, output_dir / "server_logs", env, printer)
