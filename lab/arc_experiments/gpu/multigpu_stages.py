"""Multi-GPU stages (docs/multigpu.md): the 8B recipe's layouts on 1, 2, 3 and 4 GPUs of one machine, the per-engine
weight check of a data-parallel student server, the failure drills, and the learning subject through the server path.

`multigpu` runs phases; a phase is a set of jobs on disjoint GPUs, started together and waited for; after each phase
the results so far are packed (a machine taken back mid-queue leaves the phases before). `--only C,F,E` runs those
phases in that order (default: all, in PHASES' order).
Every layout job: configs/qwen3-8b-*.yaml through `arc-trl serve`, the random 8B shape with every turn forced to its
cap, the same 32 episodes a step. Each writes OUT/multigpu/layout_NAME.json (its run summary, per-GPU peak memory from
nvidia-smi, the command); committed under results/gpu_multigpu/MACHINE/, `python -m arc_experiments.figures multigpu`
turns them into results/gpu_multigpu_summary.json, each layout against its own machine's one-GPU step (if it ran
one).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from arc_experiments.gpu.collect import collect
from arc_experiments.gpu.measure_stages import PY, shape_8b
from arc_experiments.gpu.runner import Context, failed, gpu_ids, header, run, start, stop

ZERO = "accelerate_configs/zero{}.yaml"
ASYNC = ("--async_rollouts", "1")
SYNC = ("--async_rollouts", "0")  # the shipped server configs are asynchronous; a layout's name says which it runs
TP1 = ("--vllm_tensor_parallel_size", "1")  # the shipped 4-GPU server config runs one tensor-parallel-2 engine
LAYOUTS = {  # name -> (config, GPUs, extra training flags); the configs share the one-GPU recipe's workload
    "1gpu-colocate": ("configs/qwen3-8b-1gpu-colocate.yaml", 1, ()),
    "2gpu-colocate": ("configs/qwen3-8b-2gpu-colocate.yaml", 2, ()),
    # the shipped 4-GPU config runs vLLM tensor parallel 2 (machine 5: 2.16x); tp 1 is machine 1's 4gpu-colocate row
    "4gpu-colocate": ("configs/qwen3-8b-4gpu-colocate.yaml", 4, ("--vllm_tensor_parallel_size", "1")),
    "4gpu-colocate-tp2": ("configs/qwen3-8b-4gpu-colocate.yaml", 4, ("--vllm_tensor_parallel_size", "2")),
    "2gpu-server": ("configs/qwen3-8b-2gpu-server.yaml", 2, SYNC),
    "3gpu-server-ddp": ("configs/qwen3-8b-3gpu-server.yaml", 3, ()),
    "3gpu-server-zero2": ("configs/qwen3-8b-3gpu-server.yaml", 3, ("--accelerate_config", ZERO.format(2))),
    "3gpu-server-zero3": ("configs/qwen3-8b-3gpu-server.yaml", 3, ("--accelerate_config", ZERO.format(3))),
    # ZeRO-3 on one process (zero.Init all the same): the RoPE precision fix's check where no 3 GPUs are lent
    "1gpu-colocate-zero3": ("configs/qwen3-8b-1gpu-colocate.yaml", 1, ("--accelerate_config", ZERO.format(3))),
    "4gpu-seeds": ("configs/qwen3-8b-4gpu.yaml", 4, ()),
    "4gpu-server": ("configs/qwen3-8b-4gpu-server.yaml", 4, (*TP1, *SYNC)),
    # asynchronous rollouts (docs/async.md): the same layouts, step t+1 generated while step t trains
    "2gpu-server-async1": ("configs/qwen3-8b-2gpu-server.yaml", 2, ASYNC),
    "3gpu-server-ddp-async1": ("configs/qwen3-8b-3gpu-server.yaml", 3, ASYNC),
    "4gpu-server-async1": ("configs/qwen3-8b-4gpu-server.yaml", 4, (*TP1, *ASYNC)),
    "4gpu-seeds-async1": ("configs/qwen3-8b-4gpu.yaml", 4, ASYNC),
    # one tensor-parallel-2 engine on GPUs 0-1 for all 32 episodes (the colocated tp 2 engines decoded 16 episodes in
    # 20.0 s against 27.5 s for an engine per GPU): what might bring the async step under one engine's decode
    "4gpu-server-tp2-async1": ("configs/qwen3-8b-4gpu-server.yaml", 4, ("--vllm_tensor_parallel_size", "2", *ASYNC)),
    # its synchronous twin
    "4gpu-server-tp2": ("configs/qwen3-8b-4gpu-server.yaml", 4, ("--vllm_tensor_parallel_size", "2", *SYNC)),
    # FP8 rollouts (docs/fp8.md) on the fastest 2-GPU layout: the server quantizes at load and at each weight push
    "2gpu-server-async1-fp8": ("configs/qwen3-8b-2gpu-server.yaml", 2, (*ASYNC, "--vllm_rollout_dtype", "fp8")),
}
SMALL_MODEL_JOBS = ("engine-check", "drills")  # jobs on the 0.6B shape; `learning-*`: the SmolLM2 student
PHASES = {  # label -> {job: GPUs}: a layout (LAYOUTS), a check or drill, or the learning subject's student or arm
    "A": {"1gpu-colocate": "0", "2gpu-colocate": "1,2"},
    "B": {"4gpu-colocate": "0,1,2,3"},
    "C": {"engine-check": "0,1,2", "learning-student": "3"},
    "D": {"4gpu-seeds": "0,1,2,3"},
    "E": {"2gpu-server": "0,1", "learning-server": "2,3"},
    "F": {"3gpu-server-ddp": "0,1,2", "1gpu-colocate": "3"},
    "G": {"3gpu-server-zero2": "0,1,2", "learning-colocate": "3"},
    "H": {"3gpu-server-zero3": "0,1,2"},
    "Y": {"3gpu-server-zero3": "0,1,2", "1gpu-colocate": "3"},  # H with the same machine's 1-GPU step beside it
    "I": {"4gpu-colocate-tp2": "0,1,2,3"},
    "J": {"drills": "2,3"},
    # asynchronous rollouts: each beside (or right after) its synchronous layout on the same machine
    "K": {"2gpu-server": "0,1", "2gpu-server-async1": "2,3"},
    "L": {"3gpu-server-ddp-async1": "0,1,2", "1gpu-colocate": "3"},
    "M": {"4gpu-server": "0,1,2,3"},
    "N": {"4gpu-server-async1": "0,1,2,3"},
    "O": {"4gpu-seeds-async1": "0,1,2,3"},
    "Z": {"4gpu-server-tp2-async1": "0,1,2,3"},
    "V": {"1gpu-colocate": "0", "learning-student": "3"},  # the one-GPU step, and the student before P-R share it
    "F8": {"2gpu-server-async1": "0,1", "2gpu-server-async1-fp8": "2,3"},  # bf16 beside FP8 rollouts, async server
    # what issue 40 still lacks on H100s, with F8 between them: the 2-GPU synchronous server layout beside the one-GPU
    # step, then Z's synchronous twin (docs/async.md)
    "V2": {"1gpu-colocate": "0", "2gpu-server": "2,3"},
    "Z0": {"4gpu-server-tp2": "0,1,2,3"},
    # a 2-GPU machine: the one-GPU step beside ZeRO-3's gap check, then async and sync server layouts back to back
    "S": {"1gpu-colocate": "0", "1gpu-colocate-zero3": "1"},
    "T": {"2gpu-server-async1": "0,1"},
    "U": {"2gpu-server": "0,1"},
    "T8": {"2gpu-server-async1-fp8": "0,1"},  # F8 on a 2-GPU machine: after T (its bf16 twin), `--only T,T8`
    "W": {"learning-server-async1": "0,1"},  # the SFT student (made first), then async seed 0 through the server
    "X": {"learning-server": "0,1"},  # then the synchronous seed 0 on the same machine
    # the learning subject, synchronous against asynchronous server runs, seeds 0-2 (docs/async.md)
    "P": {"learning-server-s0": "0,1", "learning-server-async1-s0": "2,3"},
    "Q": {"learning-server-s1": "0,1", "learning-server-async1-s1": "2,3"},
    "R": {"learning-server-s2": "0,1", "learning-server-async1-s2": "2,3"},
}


def shape_06b(ctx: Context) -> tuple[int, str]:
    """A random-init 0.6B shape: the engine check's and the drills' model (fast to start)."""
    path = ctx.work / "qwen3-0.6b"
    if path.exists() and not ctx.dry_run:
        return 0, str(path)
    command = [PY, "-m", "arc_trl", "build-tiny-model", "--shape", "qwen3-0.6b", "--out", str(path)]
    return run(ctx, "build-0.6b", 300, command), str(path)


def layout_command(ctx: Context, name: str, gpus: str, model: str, steps: int) -> list[str]:
    """`arc-trl serve` of the layout's config on `gpus` (ports picked free), the 8B shape, turns forced full."""
    config, count, extra = LAYOUTS[name]
    assert len(gpus.split(",")) == count, (name, gpus)
    teacher = ["--teacher_model", model] if name.startswith("4gpu-seeds") else []
    return [PY, "-m", "arc_trl", "serve", "--config", config, "--gpus", gpus, "--auto-ports", "--",
            "--model_name_or_path", model, *teacher, *extra, "--max_steps", str(steps), "--report_to", "none",
            "--save_strategy", "no", "--benchmark_full_turns", "true", "--collapse_guard", "off", "--seed", "0",
            "--output_dir", str(ctx.work / "runs" / f"layout-{name}")]


class GpuPeaks:
    """Each GPU's memory use (MiB) and utilization (%), sampled by nvidia-smi every 0.5 s while the block runs: the
    peaks of what vLLM reserves as well as what the trainer allocates (which the trainer's own figures miss), and a
    utilization trace to line up on the run's step ends (the figures' busy fractions over the measured steps)."""

    QUERY = "timestamp,index,memory.used,utilization.gpu"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> GpuPeaks:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        query = ["nvidia-smi", f"--query-gpu={self.QUERY}", "--format=csv,noheader,nounits", "-lms", "500"]
        try:
            self.process = subprocess.Popen(query, stdout=open(self.path, "w"), stderr=subprocess.DEVNULL)  # noqa: SIM115
        except FileNotFoundError:
            self.process = None
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait()

    def samples(self) -> list[tuple[float, str, int, int]]:
        """(Unix time, GPU, memory used in MiB, utilization in %) of every sample (nvidia-smi's local time, read on
        the machine that wrote it)."""
        from datetime import datetime

        found = []
        for line in self.path.read_text().splitlines() if self.path.exists() else []:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 4 or not (parts[2].isdigit() and parts[3].isdigit()):
                continue
            try:
                when = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            except ValueError:
                continue
            found.append((when, parts[1], int(parts[2]), int(parts[3])))
        return found

    def peaks(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for _, gpu, used, _ in self.samples():
            found[gpu] = max(found.get(gpu, 0), used)
        return found

    def trace(self, gpus: list[str]) -> list[list[float]]:
        """[Unix time, GPU, utilization %] of the samples of `gpus`, for the record (the figures take the window)."""
        return [[round(t, 2), int(gpu), util] for t, gpu, _, util in self.samples() if gpu in gpus]


def _record(ctx: Context, name: str, gpus: str, command: list[str], code: int, wall_s: float,
            peaks: dict[str, int], beside: list[str], trace: list[list[float]] | None = None) -> None:
    summary_path = ctx.work / "runs" / f"layout-{name}" / "run_summary.json"
    record = {
        "layout": name,
        "config": LAYOUTS[name][0],
        "gpus": LAYOUTS[name][1],
        "extra_flags": list(LAYOUTS[name][2]),
        "gpu_ids": gpus.split(","),
        "exit_code": code,
        "wall_s": round(wall_s, 1),
        "peak_mib_per_gpu": {g: peaks.get(g) for g in gpus.split(",")},
        "gpu_util_trace": trace or [],  # [Unix time, GPU, utilization %]: busy fractions over the measured steps
        "beside": beside,  # jobs of the same phase on the machine's other GPUs
        "command": command,
        "run_summary": json.loads(summary_path.read_text()) if summary_path.exists() else None,
    }
    (ctx.out / "multigpu").mkdir(parents=True, exist_ok=True)
    (ctx.out / "multigpu" / f"layout_{name}.json").write_text(json.dumps(record, indent=1))


def _wait(process: subprocess.Popen | None, limit_s: float) -> int:
    """The exit code of a run started in the background, stopped at `limit_s` (124): the runner stops its servers
    and trainer on SIGTERM (<= 80 s), killed after 120 s."""
    if process is None:
        return 0
    try:
        return process.wait(timeout=max(1.0, limit_s))
    except subprocess.TimeoutExpired:
        stop(process)
        return 124


def _job(ctx: Context, name: str, gpus: str, models: dict[str, str], steps: int, limit_s: float) -> int:
    """Run one job of a phase on `gpus` until it ends or `limit_s` passes."""
    if name in LAYOUTS:
        return _wait(start(ctx, f"layout-{name}", layout_command(ctx, name, gpus, models["8b"], steps)), limit_s)
    if name == "engine-check":
        return engine_check(ctx, models["0.6b"], gpus)
    if name == "drills":
        return run(ctx, "drills", int(limit_s), drills_command(ctx, models["0.6b"], gpus))
    if name == "learning-student":
        return learning_student(ctx, gpus.split(",")[0], int(limit_s))
    if name.startswith("learning-"):
        arm, _, seed = name.removeprefix("learning-").partition("-s")
        return learning_arm(ctx, arm, gpus, limit_s, int(seed or 0))
    raise ValueError(f"unknown job {name!r}")


def _phase(ctx: Context, label: str, jobs: dict[str, str], models: dict[str, str], steps: int, limit_s: int) -> int:
    """Start the phase's jobs together (in a dry run: one after another, printed only), wait for all, record each
    layout with the GPU peaks seen."""
    started = time.time()
    ended: dict[str, float] = {}

    def job(name: str) -> int:
        code = _job(ctx, name, jobs[name], models, steps, limit_s - (time.time() - started))
        ended[name] = time.time()
        return code

    print(f"-- phase {label}: " + ", ".join(f"{name} on GPUs {gpus}" for name, gpus in jobs.items()), flush=True)
    if ctx.dry_run:
        codes = {name: job(name) for name in jobs}
        return failed(*codes.values())
    with GpuPeaks(ctx.work / "logs" / f"gpu_peaks_{label}.csv") as sampler, \
            ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(job, name) for name in jobs}
        codes = {name: future.result() for name, future in futures.items()}
    for name, gpus in jobs.items():
        if name in LAYOUTS:
            commands = layout_command(ctx, name, gpus, models["8b"], steps)
            _record(ctx, name, gpus, commands, codes[name], ended[name] - started, sampler.peaks(),
                    [other for other in jobs if other != name], sampler.trace(gpus.split(",")))
        print(f"   {name}: rc={codes[name]}", flush=True)
    return failed(*codes.values())


def chosen_phases(only: str | None) -> list[str]:
    """The phases to run, in the order asked (`--only C,F`), or all in PHASES' order."""
    chosen = [label.strip() for label in only.split(",") if label.strip()] if only else list(PHASES)
    unknown = [label for label in chosen if label not in PHASES]
    if unknown:
        raise SystemExit(f"multigpu --only: unknown phase(s) {unknown}; phases: {list(PHASES)}")
    return chosen


def multigpu(ctx: Context) -> int:
    """The 8B recipe's layouts on 1-4 GPUs, the engine check, the drills and the learning subject through the server
    path, as phases of jobs on disjoint GPUs"""
    chosen = chosen_phases(ctx.only)
    if not ctx.dry_run:  # what the figures were measured on
        (ctx.out / "multigpu").mkdir(parents=True, exist_ok=True)
        topology = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
        path = ctx.out / "multigpu" / "machine.json"
        before = json.loads(path.read_text()).get("phases", {}) if path.exists() else {}  # an earlier start's
        machine = {"versions_and_gpu": header(), "gpu_count": len(gpu_ids()), "topology": topology.splitlines(),
                   "phases": {**before, **{label: PHASES[label] for label in chosen}}}
        path.write_text(json.dumps(machine, indent=1))
    jobs = {name for label in chosen for name in PHASES[label]}
    codes, models = [], {}
    if jobs & set(LAYOUTS):
        code, models["8b"] = shape_8b(ctx)
        codes.append(code)
    if jobs & set(SMALL_MODEL_JOBS):
        code, models["0.6b"] = shape_06b(ctx)
        codes.append(code)
    for label in chosen:
        codes.append(_phase(ctx, label, PHASES[label], models, ctx.steps or 3, ctx.phase_limit))
        collect(ctx)
    return failed(*codes)


def engine_check(ctx: Context, model: str, gpus: str) -> int:
    """A data-parallel student server (2 engines) gets the trainer's weights on every engine: temperature-0 tokens
    pinned to each engine, before and after a weight push, against the trainer's own greedy tokens."""
    return run(ctx, "engine-check", 400, [PY, "benchmarks/engine_sync_check.py", "--model", model, "--gpus", gpus,
                                          "--out", str(ctx.out / "multigpu" / "engine_check.json")])


def drills_command(ctx: Context, model: str, gpus: str) -> list[str]:
    return [PY, "benchmarks/multigpu_drills.py", "--model", model, "--gpus", gpus, "--work", str(ctx.work / "drills"),
            "--out", str(ctx.out / "multigpu" / "drills.json")]


def drills(ctx: Context) -> int:
    """The failure drills alone (benchmarks/multigpu_drills.py) on GPUs 0-1"""
    code, small = shape_06b(ctx)
    return code or run(ctx, "drills", 900, drills_command(ctx, small, "0,1"))


SMOLLM2 = "configs/gpu/smollm2"
LEARNING_ARMS = {  # name -> the layout's flags; each arm on the GPUs its phase gives it
    "colocate": [],
    "server": ["--vllm_mode", "server", "--vllm_gpus", "1", "--trainer_gpus", "1",
               "--vllm_server_args", "--max_model_len 2048"],  # the colocated engine's vllm_max_model_length
}
LEARNING_ARMS["server-async1"] = [*LEARNING_ARMS["server"], *ASYNC]
LEARNING_ARMS["colocate-fp8"] = ["--vllm_rollout_dtype", "fp8"]  # FP8 rollouts (arc_experiments/gpu/fp8_stages.py)
LEARNING_ARMS["colocate-fp8-tis"] = [*LEARNING_ARMS["colocate-fp8"],  # token-level truncated IS (docs/fp8.md)
                                     "--vllm_importance_sampling_mode", "token_truncate"]


def learning_student(ctx: Context, gpu: str, limit_s: int = 900) -> int:
    """The learning subject's student (SmolLM2 after SFT) on one GPU; kept if already made."""
    ctx = replace(ctx, configs=SMOLLM2)
    return run(ctx, f"learning-student-gpu{gpu}", max(limit_s, 60), ctx.demo("--only", "student", "--with-needs"),
               env={"CUDA_VISIBLE_DEVICES": gpu})


@contextmanager
def learning_lock(ctx: Context) -> Iterator[None]:
    """Held while a job makes the learning subject's student, writes the arms' configs and copies its own, so that
    two jobs of a phase never train the same student at once nor read a config the other is rewriting (an flock on
    WORK/learning.lock)."""
    if ctx.dry_run:
        yield
        return
    ctx.work.mkdir(parents=True, exist_ok=True)
    with open(ctx.work / "learning.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def learning_run_name(arm: str, seed: int) -> str:
    """A learning run's name: its log (logs/server-learning-NAME.log), run folder and record file carry it."""
    return arm if seed == 0 else f"{arm}-s{seed}"


def learning_arm(ctx: Context, arm: str, gpus: str, limit_s: float, seed: int = 0) -> int:
    """GRPO alone's validation-chosen recipe (arms.yaml's sSEED_grpo-only) for 20 steps on the SFT student in one
    layout (`LEARNING_ARMS`), scored in the run on the held-out tasks at steps 0, 10 and 20; writes
    OUT/multigpu/server_learning_ARM.json (seed 0) or server_learning_ARM-sSEED.json."""
    started = time.time()
    name = learning_run_name(arm, seed)
    out = ctx.work / "server-learning" / name
    config = str(out.parent / f"{name}.yaml")  # this job's own copy: the other job may rewrite the sweep's file
    with learning_lock(ctx):  # a phase's two arms start together: one makes the student and the configs, one waits
        code = learning_student(ctx, gpus.split(",")[0], int(limit_s))
        ctx = replace(ctx, configs=SMOLLM2)
        code = code or run(ctx, f"arms-configs-{arm}-s{seed}", 300, [PY, "-m", "arc_trl", "sweep",
                                                              f"{SMOLLM2}/arms.yaml", "--dry-run", "--command",
                                                              f"{PY} -m arc_trl train"])
        if not code and not ctx.dry_run:
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ctx.learning / "arms" / f"s{seed}_grpo-only" / "config.yaml", config)
    command = [PY, "-m", "arc_trl", "serve", "--config", config, "--gpus", gpus, "--auto-ports", "--",
               *LEARNING_ARMS[arm], "--max_steps", "20", "--eval_every_steps", "10", "--output_dir", str(out),
               "--save_strategy", "no"]
    if code:
        return code
    code = _wait(start(ctx, f"server-learning-{name}", command), limit_s - (time.time() - started))
    if not ctx.dry_run:
        from arc_experiments.learning.sweep_choice import evaluations

        import yaml

        summary = out / "run_summary.json"
        record = {
            "arm": arm, "seed": seed, "gpus": gpus, "config": config, "exit_code": code, "command": command,
            "wall_s": round(time.time() - started, 1),
            "eval_dataset": yaml.safe_load(open(config))["eval_dataset"],
            "run_summary": json.loads(summary.read_text()) if summary.exists() else None,
            "evaluations": {step: path.read_text() for step, path in evaluations(out)},
        }
        (ctx.out / "multigpu").mkdir(parents=True, exist_ok=True)
        (ctx.out / "multigpu" / f"server_learning_{name}.json").write_text(json.dumps(record))
    return code


def server_learning(ctx: Context) -> int:
    """The learning subject (SmolLM2 after SFT) with GRPO alone's validation-chosen recipe, 20 steps, seed 0,
    colocated on GPU 0 beside the 2-GPU server layout on GPUs 1-2, both scored on the held-out tasks at steps 0, 10
    and 20: the server path learns as the colocated one does"""
    code = learning_student(ctx, "0")
    return code or _phase(ctx, "server-learning", {"learning-colocate": "0", "learning-server": "1,2"}, {}, 0,
                          max(ctx.limit, 1500))
