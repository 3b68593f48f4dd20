"""HTCondor submit descriptions built with the `htcondor` Python bindings, submitted to the local schedd when one
is reachable, else written as a `.sub` file (plus its item data file) for `condor_submit`.

Jobs run on a shared filesystem with the submitter's environment (`getenv = true` by default): the executable is
the current Python (the project venv) and every path is absolute.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from arc_trl.collapse.rollback import COLLAPSE_EXIT_CODE
from arc_trl.launch.launch_config import gpu_split

try:  # HTCondor >= 23 ships the v2 bindings as `htcondor2`; 25.x has no v1 module any more.
    import htcondor2 as htcondor
except ImportError:  # pragma: no cover - depends on the installed bindings
    try:
        import htcondor  # type: ignore[no-redef]
    except ImportError:
        htcondor = None

_SIZE = re.compile(r"^\d+(\.\d+)?\s*([KMGT]i?B?)?$", re.IGNORECASE)
_ITEM_VALUE = re.compile(r"^[^\s,\"']+$")


class CondorError(ValueError):
    """Invalid resources or item data for a submit description."""


@dataclass
class CondorResources:
    """What one job asks for. Sizes take condor units (`64G`, `500M`; a bare number means MB for memory)."""

    gpus: int = 1
    cpus: int = 8
    memory: str = "64G"
    disk: str = "50G"
    requirements: str | None = None  # a ClassAd expression, e.g. 'TARGET.Machine == "node21.example.org"'
    max_retries: int = 2  # re-run a job that exits non-zero (it resumes from its latest checkpoint)
    getenv: bool = True
    environment: dict[str, str] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)  # raw submit commands, e.g. {"require_gpus": "Capability>=8"}

    def validate(self, where: str = "condor resources") -> CondorResources:
        for name in ("gpus", "cpus", "max_retries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise CondorError(f"{where}: {name} must be a non-negative integer, got {value!r}")
        if self.cpus < 1:
            raise CondorError(f"{where}: cpus must be >= 1")
        for name in ("memory", "disk"):
            value = str(getattr(self, name))
            if not _SIZE.match(value):
                raise CondorError(f"{where}: {name}={value!r} is not a size like 64G, 500M or 2048")
        for name in ("environment", "extra"):
            if not isinstance(getattr(self, name), dict):
                raise CondorError(f"{where}: {name} must be a mapping")
        return self

    @classmethod
    def from_mapping(cls, values: dict[str, Any], base: CondorResources, where: str) -> CondorResources:
        """`base` with the keys of `values` replaced; unknown keys raise CondorError naming `where`."""
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise CondorError(f"{where}: unknown keys {unknown} (allowed: {', '.join(sorted(allowed))})")
        merged = {f.name: getattr(base, f.name) for f in fields(cls)}
        merged.update(values)
        return cls(**merged).validate(where)


def default_resources(config: dict) -> CondorResources:
    """Resources derived from a training config: GPUs = student server + trainer + teacher server; 4 CPUs per GPU
    plus the sandbox workers; 32 GB of memory per GPU (at least 32 GB)."""
    gpus = gpu_split(config).total
    cpus = 4 * max(gpus, 1) + int(config.get("sandbox_workers") or 4)
    return CondorResources(gpus=gpus, cpus=cpus, memory=f"{32 * max(gpus, 1)}G", disk="50G")


def quote_argument(arg: str) -> str:
    """One argument in condor's new argument syntax (single quotes around whitespace, quotes doubled)."""
    if arg and not any(ch.isspace() or ch == "'" for ch in arg):
        return arg
    return "'" + arg.replace("'", "''") + "'"


def format_arguments(args: list[str]) -> str:
    """`arguments = "..."` value for a list of argv strings."""
    return '"' + " ".join(quote_argument(str(arg)) for arg in args).replace('"', '""') + '"'


def format_environment(env: dict[str, str]) -> str:
    """`environment = "..."` value (new syntax) for a mapping."""
    for key in env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)):
            raise CondorError(f"environment variable name {key!r} is not valid")
    pairs = [f"{key}={quote_argument(str(value))}" for key, value in env.items()]
    return '"' + " ".join(pairs).replace('"', '""') + '"'


def _require_bindings() -> None:
    if htcondor is None:
        raise CondorError("the htcondor Python bindings are not installed: pip install htcondor (or the "
                          "'htcondor' extra of arc-trl)")


def build_submit(
    executable: str,
    arguments: list[str],
    resources: CondorResources,
    log: Path,
    output: str,
    error: str,
    batch_name: str,
    initialdir: Path,
    request_gpus: str | None = None,
) -> Any:
    """An `htcondor.Submit` for one job (or one cluster once item data is attached with `attach_itemdata`).

    `output`/`error` may contain submit macros such as `$(run_dir)`; `request_gpus` overrides `resources.gpus` with
    a macro (per-item GPU counts of a sweep)."""
    _require_bindings()
    resources.validate()
    description = {
        "universe": "vanilla",
        "executable": executable,
        "arguments": format_arguments(arguments),
        "initialdir": str(initialdir),
        "request_gpus": request_gpus or str(resources.gpus),
        "request_cpus": str(resources.cpus),
        "request_memory": str(resources.memory),
        "request_disk": str(resources.disk),
        "getenv": "true" if resources.getenv else "false",
        "log": str(log),
        "output": output,
        "error": error,
        "max_retries": str(resources.max_retries),
        # a run the collapse guard stopped would only collapse again from its latest checkpoint: no retry
        "retry_until": f"ExitCode == {COLLAPSE_EXIT_CODE}",
        "batch_name": batch_name,
    }
    if resources.requirements:
        description["requirements"] = resources.requirements
    if resources.environment:
        description["environment"] = format_environment(resources.environment)
    for key, value in resources.extra.items():
        description[str(key)] = str(value)
    return htcondor.Submit(description)


def write_itemdata(items: list[dict[str, str]], path: Path) -> str:
    """Write one line per item (values separated by spaces) and return the queue arguments reading it."""
    if not items:
        raise CondorError("no item data: nothing to queue")
    keys = list(items[0])
    for item in items:
        if list(item) != keys:
            raise CondorError(f"item data rows must all have the keys {keys}, got {list(item)}")
        for key, value in item.items():
            if not _ITEM_VALUE.match(str(value)):
                raise CondorError(f"item data {key}={value!r} contains whitespace, a comma or a quote; condor "
                                  "splits item data on them (use paths without spaces)")
    if any(ch.isspace() for ch in str(path)):
        raise CondorError(f"item data file path {path} contains whitespace")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(" ".join(str(item[key]) for key in keys) + "\n" for item in items))
    return f"{', '.join(keys)} from {path}"


@dataclass
class SubmitOutcome:
    submit_file: Path
    command: str  # the equivalent condor_submit command
    cluster_id: int | None = None  # set when the schedd accepted the jobs
    num_jobs: int = 0
    message: str = ""


def submit_or_write(
    submit: Any,
    submit_file: Path,
    itemdata: list[dict[str, str]] | None = None,
    dry_run: bool = False,
    printer: Callable[[str], None] = print,
) -> SubmitOutcome:
    """Write `submit` to `submit_file`; unless `dry_run`, submit it to the local schedd (one cluster, one job per
    item). Without a reachable schedd the file is kept and the `condor_submit` command is printed."""
    submit_file.parent.mkdir(parents=True, exist_ok=True)
    submit_file.write_text(str(submit))
    command = f"condor_submit {submit_file}"
    outcome = SubmitOutcome(submit_file, command, num_jobs=len(itemdata) if itemdata else 1)
    if dry_run:
        outcome.message = f"dry run: wrote {submit_file}; submit with: {command}"
    else:
        try:
            schedd = htcondor.Schedd()
            if itemdata:
                result = schedd.submit(submit, itemdata=iter(itemdata))
            else:
                result = schedd.submit(submit)
            outcome.cluster_id = int(result.cluster())
            outcome.num_jobs = int(result.num_procs())
            outcome.message = f"submitted cluster {outcome.cluster_id} ({outcome.num_jobs} jobs); description in " \
                              f"{submit_file}"
        except Exception as error:  # noqa: BLE001 - any bindings failure means: fall back to the file
            outcome.message = (f"no HTCondor schedd reachable ({type(error).__name__}: {error}); wrote {submit_file}"
                               f"\nsubmit it from a submit node with:\n  {command}")
    printer(outcome.message)
    return outcome
