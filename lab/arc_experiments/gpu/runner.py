"""How a GPU stage runs its commands: each one logged to WORK/logs/NAME.log under a time limit, its exit code and last
lines printed; with `dry_run` the commands are only printed. Nothing here knows how a machine is reached."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ENV = {
    "PYTHONUNBUFFERED": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "WANDB_MODE": "disabled",
    "NCCL_NVLS_ENABLE": "0",  # NVLink multicast off (it hangs NCCL on these hosts)
    "VLLM_USE_FLASHINFER_SAMPLER": "0",
}  # vLLM samples with PyTorch where FlashInfer is not installed
ROOT = Path(__file__).resolve().parents[3]  # the checkout: commands run with its configs/ (and its arc_trl)


@dataclass
class Context:
    """A stage's settings (the command line's flags) and where it writes."""

    out: Path  # what comes back: results, logs and profiles (`collect`)
    work: Path = Path("/tmp/arc-gpu")  # models, runs and logs on the machine
    seed: int | None = None  # control's training seed (default 0), seedpair's (default 1); fp8-learning*: only this
    seeds: tuple[int, ...] | None = None  # fp8-learning*: only these (before `seed`)
    only: str | None = None  # the experiment's stages to run (pieces, teachers)
    steps: int | None = None  # optimizer steps of the measuring runs (each stage has its default)
    limit: int = 570  # seconds for a stage's main command
    phase_limit: int = 900  # multigpu: seconds each phase may run (its jobs stopped then)
    variants: list[str] = field(default_factory=lambda: ["base", "mb32", "mb64", "mb32_sw16_tb32", "mb32_sw16_tb32_pe"])
    variants_8b: list[str] = field(default_factory=lambda: ["vllm55"])  # speed8b: variants of the 8B recipe
    slots: int = 2  # opd stages: training runs at once on a GPU
    stages: tuple[str, ...] = ()  # the stages this command runs, in order (a stage may prepare for a later one)
    configs: str = "configs/gpu/learning"  # the learning experiment's profile (configs/gpu/smollm2: a pretrained LM)
    dry_run: bool = False
    commands: list[list[str]] = field(default_factory=list)  # every command run (or printed), in order

    @property
    def learning(self) -> Path:
        """The experiment's folder: WORK/<the configs folder's name>, as its configs' absolute paths say."""
        return self.work / Path(self.configs).name

    def demo(self, *args: str, configs: str | Path | None = None) -> list[str]:
        """The learning experiment's command on this machine's folder (finished stages are kept)."""
        return [
            sys.executable,
            "-m",
            "arc_experiments.learning",
            "--configs",
            str(configs or self.configs),
            "--out",
            str(self.learning),
            "--resume",
            "--no-docs",
            *args,
        ]

    def has_student(self) -> bool:
        return (self.learning / "student" / "model.safetensors").exists()


def run(
    ctx: Context, name: str, limit: int, command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> int:
    """Run `command` (cwd: the checkout) with its output in WORK/logs/NAME.log; its exit code (124: over `limit`)."""
    ctx.commands.append(command)
    print(f"== {name}: {shlex.join(command)}", flush=True)
    if ctx.dry_run:
        return 0
    logs = ctx.work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with open(logs / f"{name}.log", "w") as log:
        try:
            code = subprocess.run(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd or ROOT,
                timeout=limit,
                env={**os.environ, **ENV, **(env or {})},
            ).returncode
        except subprocess.TimeoutExpired:
            code = 124
    print(f"   rc={code} in {time.time() - started:.0f} s", flush=True)
    for line in (logs / f"{name}.log").read_text(errors="replace").splitlines()[-4:]:
        print("   " + line[:400])
    return code


def start(ctx: Context, name: str, command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen | None:
    """Start `command` in the background (`env` added to its environment), its output in WORK/logs/NAME.log (None in
    a dry run)."""
    ctx.commands.append(command)
    shown = "".join(f"{key}={value} " for key, value in (env or {}).items())
    print(f"== {name} (background): {shown}{shlex.join(command)}", flush=True)
    if ctx.dry_run:
        return None
    (ctx.work / "logs").mkdir(parents=True, exist_ok=True)
    log = open(ctx.work / "logs" / f"{name}.log", "w")  # noqa: SIM115  closed with the process
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                            env={**os.environ, **ENV, **(env or {})})


def gpu_ids() -> list[str]:
    """The machine's GPUs as nvidia-smi numbers them (none where nvidia-smi is missing or fails: it prints its error
    to stdout, "No devices were found")."""
    try:
        query = ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"]
        done = subprocess.run(query, capture_output=True, text=True)
    except FileNotFoundError:
        return []
    return [token for token in done.stdout.split() if token.isdigit()] if done.returncode == 0 else []


def pool_gpus(ctx: Context) -> tuple[str, ...]:
    """The GPUs a stage spreads its runs over: those CUDA_VISIBLE_DEVICES names, else every GPU of the machine, when
    there are several; else ("",) (the environment's one GPU)."""
    if ctx.dry_run:
        return ("",)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    found = [g.strip() for g in visible.split(",") if g.strip()] if visible else gpu_ids()
    return tuple(found) if len(found) > 1 else ("",)


GRACE_S = 120  # a stopped run's SIGTERM grace before it is killed (the runner's own stop of its servers: <= 80 s)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM (a trainer stops its vLLM and servers and saves what it can), then kill after GRACE_S."""
    process.terminate()
    try:
        process.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def first_step(log: Path, process: subprocess.Popen | None, timeout_s: float = 400) -> None:
    """Wait until a training run has logged its first step (its vLLM is up and its memory taken), or has ended: the
    moment a second GPU process can start beside it."""
    deadline = time.time() + timeout_s
    while process is not None and process.poll() is None and time.time() < deadline:
        if log.exists() and "'reward'" in log.read_text(errors="replace"):
            return
        time.sleep(5)


def failed(*codes: int) -> int:
    """The first non-zero exit code, else 0."""
    return next((c for c in codes if c), 0)


PACKAGES = ("torch", "vllm", "trl", "transformers", "peft")


def header() -> str:
    """The versions that matter and the GPU: the first line of a machine's log (what the figures were measured on)."""
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "absent"

    gpu = "no nvidia-smi"
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"]
        gpu = (subprocess.run(query, capture_output=True, text=True).stdout.splitlines() or ["?"])[0]
    return " | ".join(f"{name} {v(name)}" for name in PACKAGES) + f" | {gpu}"


@contextlib.contextmanager
def gpu_memory_samples(ctx: Context) -> Iterator[None]:
    """Sample the GPUs' memory and use once a second into WORK/logs/gpu_memory.csv while the stages run: the peaks of
    processes the trainer does not see (vLLM, a second evaluation beside a run), which `collect` brings back."""
    if ctx.dry_run or not shutil.which("nvidia-smi"):
        yield
        return
    (ctx.work / "logs").mkdir(parents=True, exist_ok=True)
    query = ["nvidia-smi", "--query-gpu=timestamp,memory.used,utilization.gpu", "--format=csv", "-lms", "1000"]
    with open(ctx.work / "logs" / "gpu_memory.csv", "a") as csv:
        sampler = subprocess.Popen(query, stdout=csv, stderr=subprocess.STDOUT)
        try:
            yield
        finally:
            sampler.terminate()
            sampler.wait()
