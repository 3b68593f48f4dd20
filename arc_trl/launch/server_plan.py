"""The plan of a training job: which vLLM servers to start, which trainer command to run, and on which GPUs.

Pure logic (no processes): `build_plan(config, ...)` -> `LaunchPlan`; `arc-trl serve` (server_runner.py) executes it.
GPUs are assigned in the order student server -> trainer -> teacher server (see launch_config.py).
"""

from __future__ import annotations

import shlex
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse, urlunparse

from arc_trl.integrations.fp8_rollout import server_args
from arc_trl.launch.launch_config import GpuSplit, gpu_split, launch_value, needs_student_server, needs_teacher_server

REPO_ROOT = Path(__file__).resolve().parents[2]
TRAIN_SCRIPT = REPO_ROOT / "scripts" / "train.py"
# GRPOConfig defaults the plan depends on (kept in sync by tests/unit/launch/test_condor.py).
DEFAULT_VLLM_SERVER_PORT = 8000
DEFAULT_VLLM_GROUP_PORT = 51216  # GRPOConfig.vllm_group_port: the NCCL weight-sync group's rendezvous
DEFAULT_MAIN_PROCESS_PORT = 29500  # accelerate / torchrun's rendezvous (MASTER_PORT) with several processes
DEFAULT_SEED = 42  # TrainingArguments.seed: the student server samples with the training seed (vLLM's own is 0)
LOCAL_HOSTS = {"localhost", "127.0.0.1", "0.0.0.0", "::1", ""}
HEALTH_PATH = "/health"  # vLLM's OpenAI server (what `trl vllm-serve` runs since TRL 1.x, and what VLLMClient polls)


class PlanError(ValueError):
    """The config cannot be laid out on the GPUs the job has."""


@dataclass
class ProcessSpec:
    role: str  # "student-vllm" | "trainer" | "teacher-vllm"
    command: list[str]
    gpus: list[str] | None  # CUDA_VISIBLE_DEVICES for the process; None leaves the environment as it is
    health_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # set in the process's environment, over the inherited one

    @property
    def cuda_visible_devices(self) -> str | None:
        return None if self.gpus is None else ",".join(self.gpus)

    def describe(self) -> str:
        devices = "(inherited)" if self.gpus is None else (self.cuda_visible_devices or '""')
        extra = "".join(f" {key}={value}" for key, value in self.env.items())
        line = f"[{self.role}] CUDA_VISIBLE_DEVICES={devices}{extra}\n    {shlex.join(self.command)}"
        if self.health_url:
            line += f"\n    health: {self.health_url}"
        return line


@dataclass
class LaunchPlan:
    split: GpuSplit
    available_gpus: list[str]
    gpu_source: str
    servers: list[ProcessSpec]
    trainer: ProcessSpec
    startup_timeout: float
    notes: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)  # what listens where: checked free before anything starts

    def describe(self) -> str:
        shown = ",".join(self.available_gpus) or "none"
        lines = [
            (f"GPUs visible: {shown} (from {self.gpu_source}); needed: {self.split.total} = student vLLM "
             f"{self.split.vllm} + trainer {self.split.trainer} + teacher vLLM {self.split.teacher}"),
            *(f"note: {note}" for note in self.notes),
        ]
        order = {"student-vllm": 0, "trainer": 1, "teacher-vllm": 2}  # the GPU order
        lines += [spec.describe() for spec in sorted([*self.servers, self.trainer], key=lambda s: order[s.role])]
        return "\n".join(lines)


class PortPicker:
    """Free TCP ports of this machine, never the same one twice."""

    def __init__(self) -> None:
        self.taken: set[int] = set()

    def __call__(self) -> int:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            if port not in self.taken:
                self.taken.add(port)
                return port


def venv_command(name: str) -> str:
    """The console script `name` next to the running Python (the venv's), else `name` from PATH."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def _url_port(key: str, url: str) -> int:
    parsed = urlparse(url)
    if parsed.hostname not in LOCAL_HOSTS and parsed.hostname != socket.gethostname():
        raise PlanError(f"{key}={url!r} points at another host; the wrapper starts its servers on this machine "
                        "(use localhost, or start the server yourself and use scripts/train.py directly)")
    if parsed.port is None:
        raise PlanError(f"{key}={url!r} has no port (e.g. http://localhost:8001)")
    return parsed.port


def _with_port(url: str, port: int) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(netloc=f"127.0.0.1:{port}"))


def _assign(split: GpuSplit, gpus: list[str]) -> tuple[list[str] | None, list[str] | None, list[str] | None]:
    if not gpus:
        return None, None, None
    vllm = gpus[: split.vllm]
    trainer = gpus[split.vllm : split.vllm + split.trainer]
    teacher = gpus[split.vllm + split.trainer : split.total]
    return vllm, trainer, teacher


def _student_server(config: dict, gpus: list[str] | None, port: int, split: GpuSplit) -> ProcessSpec:
    model = config.get("model_name_or_path")
    if not model:
        raise PlanError("use_vllm with vllm_mode: server needs model_name_or_path (the model the server loads)")
    tensor_parallel = int(config.get("vllm_tensor_parallel_size") or 1)
    if split.vllm % tensor_parallel:
        raise PlanError(f"vllm_gpus={split.vllm} is not a multiple of vllm_tensor_parallel_size={tensor_parallel}")
    command = [venv_command("trl"), "vllm-serve", "--model", str(model),
               "--data-parallel-size", str(split.vllm // tensor_parallel),
               "--tensor-parallel-size", str(tensor_parallel), "--port", str(port)]
    given = shlex.split(str(config.get("vllm_server_args") or ""))
    if not any(arg == "--seed" or arg.startswith("--seed=") for arg in given):
        # vLLM's default seed is 0 whatever the training seed: every seed of a server-layout comparison would sample
        # from one stream (the colocated engine's was fixed the same way: trl_internals.seed_colocated_sampling)
        seed = config.get("seed")
        command += ["--seed", str(DEFAULT_SEED if seed is None else int(seed))]
    try:  # FP8 rollouts (integrations/fp8_rollout.py): the server's vLLM quantizes again at each weight transfer itself
        command += server_args(str(config.get("vllm_rollout_dtype") or "bf16"),
                               str(config.get("vllm_kv_cache_dtype") or "auto"), given)
    except ValueError as error:
        raise PlanError(str(error)) from error
    command += given
    return ProcessSpec("student-vllm", command, gpus, f"http://127.0.0.1:{port}{HEALTH_PATH}")


def _teacher_server(config: dict, gpus: list[str] | None, port: int, split: GpuSplit) -> ProcessSpec:
    model = config.get("teacher_model")
    if not model:
        raise PlanError("teacher_backend: server needs teacher_model (the model the teacher server loads)")
    command = [venv_command("vllm"), "serve", str(model), "--port", str(port),
               "--tensor-parallel-size", str(split.teacher)]
    command += shlex.split(str(config.get("teacher_server_args") or ""))
    return ProcessSpec("teacher-vllm", command, gpus, f"http://127.0.0.1:{port}{HEALTH_PATH}")


def port_in_use(port: int) -> bool:
    """True when something on this machine listens on TCP `port`. The probe binds with SO_REUSEADDR, as vLLM's
    server and torch's rendezvous do: a port a stopped run left in TIME_WAIT is free for them, and for this probe."""
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return True
    return False


def _trainer_port(command: list[str], flag: str) -> int | None:
    """The value of the last `flag` in `command` (argparse keeps the last one), None without it."""
    at = [i for i, arg in enumerate(command[:-1]) if arg == flag]
    return int(command[at[-1] + 1]) if at else None


def _main_process_port(accelerate_config: str | None) -> int:
    if accelerate_config:
        import yaml

        port = (yaml.safe_load(Path(accelerate_config).read_text()) or {}).get("main_process_port")
        if port:
            return int(port)
    return DEFAULT_MAIN_PROCESS_PORT


def _accelerate_config(config: dict, config_path: Path) -> str | None:
    value = config.get("accelerate_config")
    if not value:
        return None
    for candidate in (Path(value), config_path.parent / value, REPO_ROOT / value):
        if candidate.is_file():
            return str(candidate.resolve())
    raise PlanError(f"accelerate_config {value!r} not found (relative to the current directory, {config_path.parent} "
                    f"or {REPO_ROOT})")


PLAN_KEYS = (  # the training keys the plan reads: a `--key value` on the command line overrides the YAML's
    "model_name_or_path", "teacher_model", "use_vllm", "vllm_mode", "vllm_server_base_url", "vllm_server_port",
    "vllm_group_port", "vllm_tensor_parallel_size", "teacher_backend", "teacher_server_url", "trainer_gpus",
    "vllm_gpus", "teacher_gpus", "accelerate_config", "vllm_server_args", "teacher_server_args",
    "server_startup_timeout", "output_dir", "vllm_rollout_dtype", "vllm_kv_cache_dtype", "seed",
)
BOOLEAN_PLAN_KEYS = ("use_vllm",)


def with_overrides(config: dict, train_args: list[str]) -> dict:
    """`config` with the plan's keys given on the command line (`--key value` / `--key=value`, values read as YAML
    scalars) put over the YAML's: the servers load the model the trainer is told to, e.g. a local path for a hub id."""
    import yaml

    merged = dict(config)
    for i, arg in enumerate(train_args):  # in order: a later occurrence wins, as in the trainer's parser
        if not arg.startswith("--"):
            continue
        key, has_value, value = arg[2:].partition("=")
        if key not in PLAN_KEYS:
            continue
        if not has_value:
            following = train_args[i + 1] if i + 1 < len(train_args) else None
            # argparse's rule: a word that starts with "-" is an option unless it holds a space ("--max_model_len 2048")
            if following is None or (following.startswith("-") and " " not in following):
                if key in BOOLEAN_PLAN_KEYS:  # a bare boolean flag means true to HfArgumentParser
                    merged[key] = True
                continue
            value = train_args[i + 1]
        merged[key] = yaml.safe_load(value) if value else value
    return merged


def build_plan(
    config: dict,
    config_path: Path,
    gpus: list[str],
    gpu_source: str = "--gpus",
    train_args: list[str] | None = None,
    train_script: Path = TRAIN_SCRIPT,
    use_accelerate: bool = True,
    auto_ports: bool = False,
) -> LaunchPlan:
    """Lay out `config` on `gpus` (device ids or UUIDs as in CUDA_VISIBLE_DEVICES; empty: no GPU visible).

    `auto_ports`: pick free ports for the servers, the NCCL weight-sync group and accelerate, and pass them to the
    trainer as CLI overrides, accelerate's also as MASTER_PORT in its environment (several jobs can then share a
    machine). Keys of PLAN_KEYS in `train_args` override
    the config's."""
    config = with_overrides(config, list(train_args or []))
    try:
        split = gpu_split(config)
    except ValueError as error:
        raise PlanError(f"{config_path}: {error}") from error
    notes = []
    if gpus and len(gpus) < split.total:
        raise PlanError(f"{config_path} needs {split.total} GPUs (student vLLM {split.vllm} + trainer {split.trainer}"
                        f" + teacher vLLM {split.teacher}) but only {len(gpus)} are visible ({','.join(gpus)})")
    if not gpus and split.total:
        notes.append("no GPU visible: every process runs with the inherited environment (CPU)")
    if len(gpus) > split.total:
        notes.append(f"GPUs {','.join(gpus[split.total:])} are not used by this config")
    vllm_gpus, trainer_gpus, teacher_gpus = _assign(split, gpus)

    free_port = PortPicker()
    train_args = list(train_args or [])
    overrides: list[str] = []
    servers = []
    if needs_student_server(config):
        base_url = config.get("vllm_server_base_url")
        port = _url_port("vllm_server_base_url", base_url) if base_url else int(
            config.get("vllm_server_port") or DEFAULT_VLLM_SERVER_PORT)
        if auto_ports:
            port = free_port()
            overrides += ["--vllm_server_base_url", f"http://127.0.0.1:{port}", "--vllm_group_port", str(free_port())]
        servers.append(_student_server(config, vllm_gpus, port, split))
    if needs_teacher_server(config):
        url = config.get("teacher_server_url")
        if not url:
            raise PlanError(f"{config_path}: teacher_backend: server needs teacher_server_url (e.g. "
                            "http://localhost:8001)")
        port = _url_port("teacher_server_url", url)
        if auto_ports:
            port = free_port()
            overrides += ["--teacher_server_url", _with_port(url, port)]
        servers.append(_teacher_server(config, teacher_gpus, port, split))
    ports = [spec.command[spec.command.index("--port") + 1] for spec in servers]
    if len(set(ports)) != len(ports):
        raise PlanError(f"{config_path}: the student and teacher servers both use port {ports[0]}")

    accelerate_config = _accelerate_config(config, config_path) if use_accelerate else None
    if use_accelerate:
        command = [venv_command("accelerate"), "launch", "--num_processes", str(max(split.trainer, 1))]
        if accelerate_config:
            command += ["--config_file", accelerate_config]
        elif split.trainer > 1:
            command += ["--multi_gpu"]
        if split.trainer == 0:
            command += ["--cpu"]
    trainer_env = {}
    if auto_ports:
        # accelerate exports --main_process_port as MASTER_PORT only for several processes; a single one (a colocated
        # run) would leave TRL's vLLM rendezvous to pick the first free of 29500, ... (trl.trainer.utils
        # ._find_free_port), which runs started at once both take (EADDRINUSE): pin the picked port for every count
        main_port = free_port()
        trainer_env["MASTER_PORT"] = str(main_port)
        if use_accelerate:
            command += ["--main_process_port", str(main_port)]
    if not use_accelerate:
        if split.trainer > 1:
            raise PlanError(f"{config_path}: trainer_gpus={split.trainer} needs accelerate (drop --no-accelerate)")
        command = [sys.executable]
    command += [str(train_script), "--config", str(config_path), *train_args, *overrides]
    trainer = ProcessSpec("trainer", command, trainer_gpus, env=trainer_env)
    timeout = float(launch_value(config, "server_startup_timeout"))
    listening = {f"{spec.role} (--port)": int(spec.command[spec.command.index("--port") + 1]) for spec in servers}
    if needs_student_server(config):
        listening["vllm_group_port (the NCCL weight-sync group)"] = _trainer_port(command, "--vllm_group_port") or int(
            config.get("vllm_group_port") or DEFAULT_VLLM_GROUP_PORT)
    if "MASTER_PORT" in trainer_env:
        listening["main_process_port (accelerate's rendezvous, MASTER_PORT)"] = int(trainer_env["MASTER_PORT"])
    elif use_accelerate and split.trainer > 1:
        listening["main_process_port (accelerate's rendezvous, MASTER_PORT)"] = _trainer_port(
            command, "--main_process_port") or _main_process_port(accelerate_config)
    return LaunchPlan(split, list(gpus), gpu_source, servers, trainer, timeout, notes, listening)
