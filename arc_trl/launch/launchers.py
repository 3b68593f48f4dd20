"""Launchers of a sweep's runs: `local` (subprocesses, one after another or N at a time on GPU sets) and `condor`
(one HTCondor cluster, one job per run). Both skip finished runs and resume interrupted ones; `run_sweep` ties
loading, expansion, writing and launching together.
"""

from __future__ import annotations

import os
import queue
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from arc_trl.collapse.rollback import COLLAPSE_EXIT_CODE, STOP_FILE
from arc_trl.launch.condor import (
    CondorError,
    CondorResources,
    build_submit,
    default_resources,
    submit_or_write,
    write_itemdata,
)
from arc_trl.launch.launch_config import gpu_split
from arc_trl.launch.processes import Terminated, signals_as_exceptions, start, stop
from arc_trl.launch.run_state import FINISHED, RESUMABLE
from arc_trl.launch.sweep import (
    REPO_ROOT,
    Run,
    SweepError,
    SweepSpec,
    expand_sweep,
    format_table,
    load_sweep,
    write_manifest,
    write_runs,
)

# `arc-trl serve` run by this interpreter (python -m arc_trl): the config's vLLM servers, then `accelerate launch`
SERVE_ARGS = ["-m", "arc_trl", "serve"]
LOG_FILE = "train.log"
Printer = Callable[[str], None]


def _print(message: str) -> None:
    print(message, flush=True)


def default_command_prefix() -> list[str]:
    """`python -m arc_trl serve`: starts the config's vLLM servers, then `accelerate launch scripts/train.py`."""
    return [sys.executable, *SERVE_ARGS]


def parse_gpu_sets(text: str | None) -> list[str] | None:
    """`"0,1;2,3"` -> `["0,1", "2,3"]` (one CUDA_VISIBLE_DEVICES value per parallel slot)."""
    if not text:
        return None
    sets = [part.replace(" ", "") for part in text.split(";")]
    if any(not part or any(not token for token in part.split(",")) for part in sets):
        raise ValueError(f"--gpus {text!r}: expected GPU sets like '0,1;2,3' (comma within a set, ';' between sets)")
    return sets


def run_env(spec: SweepSpec, gpus: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_RUN_GROUP": str(spec.wandb_group)}
    if spec.wandb_project:
        env["WANDB_PROJECT"] = spec.wandb_project
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    return env


def run_command(run: Run, command_prefix: list[str]) -> list[str]:
    """`<prefix> --config <run>/config.yaml`, plus `--resume_from_checkpoint <latest>` for an interrupted run."""
    command = [*command_prefix, "--config", str(run.config_path)]
    state = run.state()
    if state.status == RESUMABLE:
        command += ["--resume_from_checkpoint", str(state.checkpoint)]
    return command


@dataclass
class RunResult:
    name: str
    start_status: str  # new | resumable | finished (finished runs are skipped)
    exit_code: int | None = None  # None: skipped, or not run by this launcher (condor)
    seconds: float = 0.0
    gpus: str | None = None
    collapse_stop: bool = False  # the run's output_dir holds the collapse guard's STOP_FILE

    def describe(self) -> str:
        if self.start_status == FINISHED:
            return "skipped (finished)"
        if self.exit_code is None:
            return "not run"
        outcome = "ok" if self.exit_code == 0 else f"FAILED (exit {self.exit_code})"
        if self.exit_code == COLLAPSE_EXIT_CODE and self.collapse_stop:
            outcome = f"FAILED (exit {self.exit_code}: collapse guard stop, reason in collapse_guard_stop.json)"
        return f"{outcome} in {self.seconds:.1f} s"


@dataclass
class LocalLauncher:
    """Runs each run as a subprocess with its output in `<run_dir>/train.log`; a failing run does not stop others.

    `gpu_sets`: one CUDA_VISIBLE_DEVICES value per slot (at most one run per slot at a time); `max_parallel` defaults
    to the number of GPU sets (1 without)."""

    command_prefix: list[str] = field(default_factory=default_command_prefix)
    max_parallel: int | None = None
    gpu_sets: list[str] | None = None
    printer: Printer = _print

    def slots(self) -> list[str | None]:
        count = self.max_parallel or (len(self.gpu_sets) if self.gpu_sets else 1)
        if count < 1:
            raise ValueError(f"--max-parallel must be >= 1, got {count}")
        if self.gpu_sets is None:
            return [None] * count
        if count > len(self.gpu_sets):
            raise ValueError(f"--max-parallel {count} needs as many GPU sets, --gpus gives {len(self.gpu_sets)}")
        return list(self.gpu_sets[:count])

    def check_gpus(self, runs: list[Run]) -> None:
        if not self.gpu_sets:
            return
        for run in runs:
            needed = gpu_split(run.config).total
            small = [gpus for gpus in self.gpu_sets if len(gpus.split(",")) < needed]
            if small:
                raise ValueError(f"run {run.name} needs {needed} GPUs but GPU set(s) {small} are smaller")

    def launch(self, spec: SweepSpec, runs: list[Run]) -> list[RunResult]:
        self.check_gpus(runs)
        slots: queue.Queue = queue.Queue()
        for slot in self.slots():
            slots.put(slot)
        results = {run.name: RunResult(run.name, run.state().status) for run in runs}
        todo = [run for run in runs if results[run.name].start_status != FINISHED]
        running: dict[str, subprocess.Popen] = {}
        lock = threading.Lock()
        stopping = threading.Event()

        def execute(run: Run) -> None:
            gpus = slots.get()
            try:
                result = results[run.name]
                result.gpus = gpus
                command = run_command(run, self.command_prefix)
                log_path = run.run_dir / LOG_FILE
                where = f" on GPUs {gpus}" if gpus is not None else ""
                began = time.monotonic()
                with open(log_path, "a") as log:
                    with lock:  # no new process once stopping is set (see the interrupt handler below)
                        if stopping.is_set():
                            return
                        self.printer(f"[start] {run.name} ({result.start_status}){where}: log {log_path}")
                        log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(command)}\n")
                        log.flush()
                        try:
                            process = start(command, run_env(spec, gpus), stdout=log)
                        except OSError as error:  # e.g. a --command that does not exist: this run fails, not all
                            log.write(f"cannot start {command[0]}: {error}\n")
                            process = None
                        else:
                            running[run.name] = process
                    result.exit_code = process.wait() if process else 127
                    result.collapse_stop = (run.output_dir / STOP_FILE).is_file()
                    with lock:
                        running.pop(run.name, None)
                result.seconds = time.monotonic() - began
                self.printer(f"[done]  {run.name}: {result.describe()}")
            finally:
                slots.put(gpus)

        pool = ThreadPoolExecutor(max_workers=len(self.slots()))
        try:
            with signals_as_exceptions():
                futures = [pool.submit(execute, run) for run in todo]
                for future in futures:
                    while not future.done():
                        time.sleep(0.05)
                    future.result()
        except (Terminated, KeyboardInterrupt):
            self.printer("[stop]  interrupted: stopping running trainings (they resume on the next launch)")
            with lock:
                stopping.set()
                to_stop = list(running.values())
            for process in to_stop:
                stop(process)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return [results[run.name] for run in runs]


@dataclass
class CondorLauncher:
    """Submits the unfinished runs as one cluster (`queue run_name, run_dir, gpus from <items file>`).

    Each job runs `python -m arc_trl serve --config <run_dir>/config.yaml --resume --auto-ports`, so a
    retried or re-submitted job resumes from its latest checkpoint at start and a finished one exits at once.
    Resources: the sweep file's `condor:` block over defaults derived from the largest run's config."""

    overrides: dict = field(default_factory=dict)
    dry_run: bool = False
    printer: Printer = _print

    def resources(self, spec: SweepSpec, runs: list[Run]) -> CondorResources:
        derived = [default_resources(run.config) for run in runs]
        base = CondorResources(
            gpus=max(r.gpus for r in derived),
            cpus=max(r.cpus for r in derived),
            memory=max(derived, key=lambda r: float(r.memory[:-1])).memory,
            disk=derived[0].disk,
        )
        values = {**spec.condor, **self.overrides}
        return CondorResources.from_mapping(values, base, f"{spec.path}: condor")

    def launch(self, spec: SweepSpec, runs: list[Run]) -> list[RunResult]:
        results = [RunResult(run.name, run.state().status) for run in runs]
        todo = [run for run, result in zip(runs, results) if result.start_status != FINISHED]
        if not todo:
            self.printer("every run is finished: nothing to submit")
            return results
        try:
            resources = self.resources(spec, todo)
            per_run_gpus = "gpus" not in {**spec.condor, **self.overrides}
            condor_dir = spec.sweep_dir / "condor"
            items = [{"run_name": run.name, "run_dir": str(run.run_dir),
                      "gpus": str(gpu_split(run.config).total if per_run_gpus else resources.gpus)} for run in todo]
            queue_args = write_itemdata(items, condor_dir / "items.txt")
            submit = build_submit(
                executable=sys.executable,
                arguments=[*SERVE_ARGS, "--config", "$(run_dir)/config.yaml", "--resume", "--auto-ports"],
                resources=CondorResources.from_mapping(
                    {"environment": {"WANDB_RUN_GROUP": spec.wandb_group,
                                     **({"WANDB_PROJECT": spec.wandb_project} if spec.wandb_project else {}),
                                     **resources.environment}}, resources, "condor environment"),
                log=condor_dir / "condor.log",
                output=f"$(run_dir)/{LOG_FILE}",
                error="$(run_dir)/train.err",
                batch_name=spec.name,
                initialdir=REPO_ROOT,
                request_gpus="$(gpus)",
            )
            submit.setQArgs(queue_args)
        except CondorError as error:
            raise SweepError(spec.path, str(error)) from error
        submit_or_write(submit, condor_dir / "sweep.sub", items, dry_run=self.dry_run, printer=self.printer)
        return results


def _summary(results: list[RunResult]) -> str:
    width = max(len(result.name) for result in results)
    return "\n".join(f"  {result.name.ljust(width)}  {result.describe()}" for result in results)


def run_sweep(
    sweep_file: str | Path,
    launcher: str = "local",
    command_prefix: list[str] | None = None,
    dry_run: bool = False,
    max_parallel: int | None = None,
    gpus: str | None = None,
    sweep_dir: str | Path | None = None,
    known_keys: set[str] | None = None,
    condor_overrides: dict | None = None,
    printer: Printer = _print,
    preflight: Callable[[Path], tuple[bool, str]] | None = None,
) -> dict[str, int | None]:
    """Expand `sweep_file`, write its run folders and manifest, print the table and launch.

    Returns run name -> exit code (None for skipped finished runs, for every run with `dry_run` and with the condor
    launcher). `command_prefix` replaces `python -m arc_trl serve` for the local launcher (tests use a
    fake training script). With `dry_run` and `preflight` (`arc_trl.launch.preflight.preflight`), each run's config is
    checked as `arc-trl train --check_config true` would: a run that fails it gets exit code 2."""
    spec = load_sweep(sweep_file, sweep_dir)
    runs = expand_sweep(spec, known_keys)
    for warning in write_runs(spec, runs):
        printer(f"warning: {warning}")
    counts = {status: sum(run.state().status == status for run in runs) for status in ("new", RESUMABLE, FINISHED)}
    printer(f"sweep {spec.name}: {len(runs)} runs in {spec.sweep_dir} "
            f"({', '.join(f'{n} {status}' for status, n in counts.items())})")
    printer(format_table(spec, runs))
    checked: dict[str, int | None] = {run.name: None for run in runs}
    if dry_run and preflight is not None:
        for run in runs:
            passed, found = preflight(run.config_path)
            checked[run.name] = None if passed else 2
            printer(f"preflight {run.name}: {'ok, ' if passed else ''}{found}")
        failed = sum(code is not None for code in checked.values())
        printer(f"preflight: {len(runs) - failed} of {len(runs)} runs passed")
    if dry_run and launcher == "local":
        printer("dry run: configs and sweep_manifest.json written, nothing launched")
        return checked
    if launcher == "local":
        try:
            local = LocalLauncher(command_prefix or default_command_prefix(), max_parallel, parse_gpu_sets(gpus),
                                  printer)
            local.slots()
            local.check_gpus(runs)
        except ValueError as error:
            raise SweepError(spec.path, str(error)) from error
        results = local.launch(spec, runs)
        codes = {result.name: result.exit_code for result in results}
        write_manifest(spec, runs, codes)
        failed = sum(1 for code in codes.values() if code not in (0, None))
        printer(f"summary ({len(results) - failed} ok or skipped, {failed} failed):\n{_summary(results)}")
        return codes
    if launcher == "condor":
        if command_prefix is not None or gpus is not None or max_parallel is not None:
            raise SweepError(spec.path, "--command/--gpus/--max-parallel apply to the local launcher only")
        CondorLauncher(condor_overrides or {}, dry_run, printer).launch(spec, runs)
        return checked
    raise SweepError(spec.path, f"unknown launcher {launcher!r} (use local or condor)")
