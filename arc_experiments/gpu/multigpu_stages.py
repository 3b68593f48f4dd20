"""Multi-GPU stages (docs/multigpu.md): the 8B recipe's layouts on 1, 2 and 4 GPUs of one machine, the per-engine
weight check of a data-parallel student server, and the failure drills.

`multigpu` runs phases, each a set of runs on disjoint GPUs started together and waited for; after each phase the
results so far are packed (a machine taken back mid-queue leaves the phases before). By default A-D; `--only E,F`:
  A: 1 GPU colocated (GPU 0) beside 2 GPUs colocated (GPUs 1-2)    B: 4 GPUs colocated
  C: the engine check (GPUs 0-2), then the seeds' 4-GPU layout    D: 2 GPUs server mode (GPUs 0-1) beside the drills
  E: 4 GPUs colocated, vLLM tensor parallel 2          F, G, H: a server GPU + 2 trainer GPUs (DDP, ZeRO-2, ZeRO-3)
Every run: configs/qwen3-8b-*.yaml through `arc-trl serve`, the random 8B shape with every turn forced to its cap,
the same 32 episodes a step. Each writes OUT/multigpu/layout_NAME.json (its run summary, per-GPU peak memory from
nvidia-smi, the command); committed under results/gpu_multigpu/, `python -m arc_experiments.figures multigpu` turns
them into results/gpu_multigpu_summary.json.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from arc_experiments.gpu.measure_stages import PY, shape_8b
from arc_experiments.gpu.runner import Context, failed, header, run, start

ZERO = "accelerate_configs/zero{}.yaml"
LAYOUTS = {  # name -> (config, GPUs, extra training flags); the configs share the one-GPU recipe's workload
    "1gpu-colocate": ("configs/qwen3-8b-1gpu-colocate.yaml", 1, ()),
    "2gpu-colocate": ("configs/qwen3-8b-2gpu-colocate.yaml", 2, ()),
    "4gpu-colocate": ("configs/qwen3-8b-4gpu-colocate.yaml", 4, ()),
    "4gpu-colocate-tp2": ("configs/qwen3-8b-4gpu-colocate.yaml", 4, ("--vllm_tensor_parallel_size", "2")),
    "2gpu-server": ("configs/qwen3-8b-2gpu-server.yaml", 2, ()),
    "3gpu-server-ddp": ("configs/qwen3-8b-3gpu-server.yaml", 3, ()),
    "3gpu-server-zero2": ("configs/qwen3-8b-3gpu-server.yaml", 3, ("--accelerate_config", ZERO.format(2))),
    "3gpu-server-zero3": ("configs/qwen3-8b-3gpu-server.yaml", 3, ("--accelerate_config", ZERO.format(3))),
    "4gpu-seeds": ("configs/qwen3-8b-4gpu.yaml", 4, ()),
}
PHASES = (  # label -> the layouts run together, on disjoint GPUs (`--only A,C`: some phases)
    ("A", {"1gpu-colocate": "0", "2gpu-colocate": "1,2"}),
    ("B", {"4gpu-colocate": "0,1,2,3"}),
    ("C", {"4gpu-seeds": "0,1,2,3"}),
    ("D", {"2gpu-server": "0,1"}),
    ("E", {"4gpu-colocate-tp2": "0,1,2,3"}),
    ("F", {"3gpu-server-ddp": "0,1,2"}),
    ("G", {"3gpu-server-zero2": "0,1,2"}),
    ("H", {"3gpu-server-zero3": "0,1,2"}),
)


def _gpu_ids() -> list[str]:
    query = ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"]
    return subprocess.run(query, capture_output=True, text=True).stdout.split()


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
    teacher = ["--teacher_model", model] if name == "4gpu-seeds" else []
    return [PY, "-m", "arc_trl", "serve", "--config", config, "--gpus", gpus, "--auto-ports", "--",
            "--model_name_or_path", model, *teacher, *extra, "--max_steps", str(steps), "--report_to", "none",
            "--save_strategy", "no", "--benchmark_full_turns", "true", "--collapse_guard", "off", "--seed", "0",
            "--output_dir", str(ctx.work / "runs" / f"layout-{name}")]


class GpuPeaks:
    """Each GPU's largest memory use (MiB, nvidia-smi every 0.5 s) while the block runs: what vLLM reserves as well
    as what the trainer allocates, which the trainer's own figures miss."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> GpuPeaks:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        query = ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits", "-lms", "500"]
        try:
            self.process = subprocess.Popen(query, stdout=open(self.path, "w"), stderr=subprocess.DEVNULL)  # noqa: SIM115
        except FileNotFoundError:
            self.process = None
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait()

    def peaks(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for line in self.path.read_text().splitlines() if self.path.exists() else []:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[1].isdigit():
                found[parts[0]] = max(found.get(parts[0], 0), int(parts[1]))
        return found


def _record(ctx: Context, name: str, gpus: str, command: list[str], code: int, wall_s: float,
            peaks: dict[str, int], beside: list[str]) -> None:
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
        "beside": beside,  # runs of the same phase on the machine's other GPUs
        "command": command,
        "run_summary": json.loads(summary_path.read_text()) if summary_path.exists() else None,
    }
    (ctx.out / "multigpu").mkdir(parents=True, exist_ok=True)
    (ctx.out / "multigpu" / f"layout_{name}.json").write_text(json.dumps(record, indent=1))


def _phase(ctx: Context, label: str, runs: dict[str, str], model: str, steps: int, limit: int,
           beside: dict[str, list[str]] | None = None) -> int:
    """Start the phase's layout runs together, wait for all (each stopped at `limit` s), record each."""
    started = time.time()
    commands = {name: layout_command(ctx, name, gpus, model, steps) for name, gpus in runs.items()}
    if ctx.dry_run:
        for name, command in commands.items():
            start(ctx, f"layout-{name}", command)  # printed only
        return 0
    with GpuPeaks(ctx.work / "logs" / f"gpu_peaks_{label}.csv") as sampler:
        processes = {name: start(ctx, f"layout-{name}", command) for name, command in commands.items()}
        codes, ended = {}, {}
        for name, process in processes.items():
            try:
                codes[name] = process.wait(timeout=max(1, limit - (time.time() - started)))
            except subprocess.TimeoutExpired:  # the runner stops its servers and trainer on SIGTERM (<= 80 s)
                process.terminate()
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                codes[name] = 124
            ended[name] = time.time()
    for name, gpus in runs.items():
        others = [other for other in runs if other != name] + (beside or {}).get(name, [])
        _record(ctx, name, gpus, commands[name], codes[name], ended[name] - started, sampler.peaks(), others)
        print(f"   {name}: rc={codes[name]}", flush=True)
    return failed(*codes.values())


def multigpu(ctx: Context) -> int:
    """The 8B recipe's layouts on 1, 2 and 4 GPUs (phases A-D), the engine check and the failure drills"""
    from arc_experiments.gpu.stages import collect

    if not ctx.dry_run:  # what the figures were measured on
        (ctx.out / "multigpu").mkdir(parents=True, exist_ok=True)
        topology = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout
        machine = {"versions_and_gpu": header(), "gpu_count": len(_gpu_ids()), "topology": topology.splitlines()}
        (ctx.out / "multigpu" / "machine.json").write_text(json.dumps(machine, indent=1))
    code, model = shape_8b(ctx)
    code_small, small = shape_06b(ctx)
    steps = ctx.steps or 3
    codes = [code, code_small]
    chosen = set(ctx.only.split(",")) if ctx.only else {"A", "B", "C", "D"}
    unknown = chosen - {label for label, _ in PHASES}
    if unknown:
        raise SystemExit(f"multigpu --only: unknown phase(s) {sorted(unknown)}; phases: {[p for p, _ in PHASES]}")
    for label, runs in PHASES:
        if label not in chosen:
            continue
        if label == "C":
            codes.append(engine_check(ctx, small, "0,1,2"))
        if label == "D":
            drills = start(ctx, "drills", [PY, "benchmarks/multigpu_drills.py", "--model", small, "--gpus", "2,3",
                                           "--work", str(ctx.work / "drills"), "--out",
                                           str(ctx.out / "multigpu" / "drills.json")])
            codes.append(_phase(ctx, label, runs, model, steps, max(ctx.limit, 900), {"2gpu-server": ["drills"]}))
            codes.append(drills.wait() if drills is not None else 0)
        else:
            codes.append(_phase(ctx, label, runs, model, steps, max(ctx.limit, 900)))
        collect(ctx)
    return failed(*codes)


def engine_check(ctx: Context, model: str, gpus: str) -> int:
    """A data-parallel student server (2 engines) gets the trainer's weights on every engine: temperature-0 tokens
    pinned to each engine, before and after a weight push, against the trainer's own greedy tokens."""
    return run(ctx, "engine-check", 400, [PY, "benchmarks/engine_sync_check.py", "--model", model, "--gpus", gpus,
                                          "--out", str(ctx.out / "multigpu" / "engine_check.json")])


def drills(ctx: Context) -> int:
    """The failure drills alone (benchmarks/multigpu_drills.py) on GPUs 0-1"""
    code, small = shape_06b(ctx)
    return code or run(ctx, "drills", 900, [PY, "benchmarks/multigpu_drills.py", "--model", small, "--gpus", "0,1",
                                            "--work", str(ctx.work / "drills"), "--out",
                                            str(ctx.out / "multigpu" / "drills.json")])


SMOLLM2 = "configs/gpu/smollm2"


def server_learning(ctx: Context) -> int:
    """The learning subject (SmolLM2 after SFT) with GRPO alone's validation-chosen recipe (arms.yaml's s0_grpo-only),
    20 steps, seed 0, colocated on GPU 0 beside the 2-GPU server layout on GPUs 1-2, both scored in the run on the
    held-out tasks at steps 0 and 20: the server path learns as the colocated one does"""
    from dataclasses import replace

    ctx = replace(ctx, configs=SMOLLM2)
    codes = [
        run(ctx, "shared", max(ctx.limit, 900), ctx.demo("--only", "student", "--with-needs")),
        run(ctx, "arms-configs", 300, [PY, "-m", "arc_trl", "sweep", f"{SMOLLM2}/arms.yaml", "--dry-run",
                                       "--command", f"{PY} -m arc_trl train"]),
    ]
    config = str(ctx.learning / "arms" / "s0_grpo-only" / "config.yaml")
    layouts = {  # name -> (GPUs, the layout's flags)
        "colocate": ("0", []),
        "server": ("1,2", ["--vllm_mode", "server", "--vllm_gpus", "1", "--trainer_gpus", "1"]),
    }
    processes = {}
    for name, (gpus, flags) in layouts.items():
        out = ctx.work / "server-learning" / name
        processes[name] = start(ctx, f"server-learning-{name}", [
            PY, "-m", "arc_trl", "serve", "--config", config, "--gpus", gpus, "--auto-ports", "--", *flags,
            "--max_steps", "20", "--output_dir", str(out), "--save_strategy", "no"])
    for process in processes.values():
        codes.append(0 if process is None else process.wait())
    if not ctx.dry_run:
        from arc_experiments.learning.sweep_choice import evaluations

        import yaml

        result = {"config": config, "eval_dataset": yaml.safe_load(open(config))["eval_dataset"], "runs": {}}
        for name in layouts:
            out = ctx.work / "server-learning" / name
            summary = out / "run_summary.json"
            result["runs"][name] = {
                "run_summary": json.loads(summary.read_text()) if summary.exists() else None,
                "evaluations": {step: path.read_text() for step, path in evaluations(out)},
            }
        (ctx.out / "multigpu").mkdir(parents=True, exist_ok=True)
        (ctx.out / "multigpu" / "server_learning.json").write_text(json.dumps(result))
    return failed(*codes)
