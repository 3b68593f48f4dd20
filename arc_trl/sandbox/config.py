"""Limits and options of the sandbox (one `SandboxConfig` per `SandboxPool`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arc_trl.config import defaults


@dataclass(frozen=True)
class SandboxConfig:
    """Per-call and per-session limits. Times are seconds, sizes MB unless stated.

    Time limits (docs/sandbox.md, "Time limits"): `timeout_s` is the CPU time a code run may use, so a verdict does
    not depend on how busy the machine is; `wall_timeout_s` is a generous wall-clock backstop for code that sleeps or
    blocks. Both are enforced inside the child first (an exception is raised in the model's code and the session
    state survives); the trainer kills the child when its CPU time (read from the kernel) passes the CPU limit by
    `kill_grace_s`, or the backstop passes by `kill_grace_s` (then the session is restarted and its state is lost).

    `check_transform` (REPL turns, `Session.run_turn`): after a message whose code defines `transform(grid)` and
    makes no SUBMIT, `transform` is applied to every train and test input; the reply says which training outputs it
    reproduces, and when it reproduces all of them its test outputs are submitted (the episode ends). A pretrained
    coder's habit, one ```python block with a function, then needs no REPL conventions.
    """

    timeout_s: float = defaults.SANDBOX_TIMEOUT_S  # CPU seconds per code run
    wall_timeout_s: float | None = None  # wall-clock backstop per run (None: max(4 x CPU limit, CPU limit + 5 s))
    cpu_time_s: float | None = None  # legacy: a CPU limit below timeout_s (None: timeout_s); the limit is the smaller
    program_timeout_s: float | None = None  # CPU seconds per `transform` call in program mode (None: timeout_s)
    kill_grace_s: float = 1.0  # hard kill this long after the soft limit
    memory_mb: int = defaults.SANDBOX_MEMORY_MB  # address space of the interpreter; Python + numpy take ~110 MB of it
    max_output_chars: int = defaults.SANDBOX_MAX_OUTPUT_CHARS  # per stream per run; the rest dropped with a marker
    max_threads: int = 1  # threads the model code may run, the main thread included (1: no extra threads/processes)
    max_recursion_depth: int = 10_000  # sys.setrecursionlimit is capped at this (Python's default limit is 1000)
    max_code_chars: int = 100_000  # longer code is refused without running it
    max_blocks_per_turn: int = 8  # code blocks run per assistant message; later ones are skipped with a note
    session_cpu_s: int = 600  # RLIMIT_CPU of a whole session process (it is restarted when exhausted)
    max_file_mb: int = 16  # largest file the code may write in its working directory
    max_open_files: int = 64
    disk_mb: int = defaults.SANDBOX_DISK_MB  # MB the working directory may hold (private tmpfs: memory, freed after)
    max_files: int = defaults.SANDBOX_MAX_FILES  # files + folders the working directory may hold (private tmpfs)
    private_tmpfs: bool = True  # working directory = a size/inode-limited tmpfs where the kernel allows it
    idle_memory_mb: int | None = defaults.SANDBOX_IDLE_MEMORY_MB  # resident MB kept between runs, else restarted
    allowed_packages: tuple[str, ...] = field(default_factory=tuple)  # importable besides numpy and the stdlib
    work_root: str | None = None  # where session working directories are created (None: the system temp dir)
    start_timeout_s: float = 60.0  # starting the zygote (imports numpy) or a session
    audit_hook: bool = True  # the Python-level policy layer; switch off only to test the kernel layers alone
    check_transform: bool = False  # REPL: a message defining `transform` gets it checked on the train pairs (below)

    def __post_init__(self) -> None:
        positive = ["timeout_s", "kill_grace_s", "memory_mb", "max_output_chars", "max_threads", "max_recursion_depth",
                    "max_code_chars",
                    "max_blocks_per_turn", "session_cpu_s", "max_file_mb", "max_open_files", "start_timeout_s",
                    "disk_mb", "max_files"]
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"SandboxConfig.{name} must be a positive number, got {value!r}")
        for name in ("cpu_time_s", "program_timeout_s", "idle_memory_mb", "wall_timeout_s"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"SandboxConfig.{name} must be a positive number or None, got {value!r}")
        if self.memory_mb < 256:
            raise ValueError(f"SandboxConfig.memory_mb must be at least 256 (Python + numpy need ~110 MB), "
                             f"got {self.memory_mb}")
        if self.idle_memory_mb is not None and self.idle_memory_mb < 64:
            raise ValueError(f"SandboxConfig.idle_memory_mb must be at least 64 or None (an idle Python + numpy "
                             f"session keeps ~28 MB resident), got {self.idle_memory_mb}")
        if isinstance(self.allowed_packages, str):
            raise TypeError("SandboxConfig.allowed_packages must be a list of package names, not a string")
        object.__setattr__(self, "allowed_packages", tuple(self.allowed_packages))

    @property
    def transform_timeout_s(self) -> float:
        return self.program_timeout_s if self.program_timeout_s is not None else self.timeout_s

    def time_limits(self, timeout_s: float | None = None) -> tuple[float, float]:
        """(CPU seconds, wall-clock backstop seconds) of one run whose time limit is `timeout_s` (None: `timeout_s`
        of the config)."""
        cpu = float(timeout_s) if timeout_s is not None else self.timeout_s
        if self.cpu_time_s is not None:
            cpu = min(cpu, self.cpu_time_s)
        wall = self.wall_timeout_s if self.wall_timeout_s is not None else max(4 * cpu, cpu + 5.0)
        return cpu, wall

    @property
    def max_reply_bytes(self) -> int:
        """Largest message accepted from a child: two capped streams (at most 12 bytes per character once escaped as
        JSON surrogate pairs) plus grids and bookkeeping."""
        return 2 * 12 * self.max_output_chars + 4 * 1024 * 1024

    def child_settings(self) -> dict[str, Any]:
        """The subset the child needs."""
        keys = ("memory_mb", "max_output_chars", "max_threads", "max_recursion_depth", "session_cpu_s", "max_file_mb",
                "max_open_files", "audit_hook", "disk_mb", "max_files", "private_tmpfs")
        return {k: getattr(self, k) for k in keys}  # all plain values (asdict would deep-copy every field)
