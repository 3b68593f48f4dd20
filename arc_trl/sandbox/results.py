"""What the sandbox reports: one code run (`ExecResult`), one assistant turn (`TurnResult`), one program
(`ProgramResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_trl.data.task import Grid

# 'ok': ran to the end (or to a valid SUBMIT); 'error': raised an exception (SyntaxError included);
# 'timeout': CPU limit or wall-clock backstop; 'memory': MemoryError under the address-space limit;
# 'crashed': the interpreter died (segfault, os._exit, SIGKILL, ...) and was restarted;
# 'refused': the sandbox refused the code (too long) or an operation it attempted (file, network, process, import).
STATUSES = ("ok", "error", "timeout", "memory", "crashed", "refused")


@dataclass
class ExecResult:
    """The result of running one code string in a session."""

    status: str
    stdout: str = ""
    stderr: str = ""
    error_kind: str | None = None  # exception name, 'wall_time'/'cpu_time'/'hard_timeout', 'signal:SIGSEGV', ...
    seconds: float = 0.0
    truncated: bool = False  # stdout or stderr was cut (the text ends with a marker saying how much)
    submitted: list[Grid] | None = None  # the grids of a valid SUBMIT made by this code
    submit_error: str | None = None  # why the last SUBMIT of this code was rejected
    restarted: bool = False  # the interpreter died or was killed and was replaced: earlier state is lost
    note: str | None = None  # what the sandbox did (timeout kill, crash, restart), phrased for the model
    has_transform: bool = False  # after this code, the namespace holds a callable named `transform`
    compiled: bool = False  # the code is valid Python (compiled by the child; False when refused unrun)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class TurnResult:
    """The result of running the code blocks of one assistant message."""

    observation: str  # the text to send back to the model as the next user message
    code_found: bool
    code_parsed: bool  # at least one block that ran is valid Python (it compiled in the sandbox)
    submitted: list[Grid] | None = None  # set when a block made a valid SUBMIT (the episode is over)
    results: list[ExecResult] = field(default_factory=list)  # one per block that was run
    n_blocks: int = 0  # code blocks found (some may not have run: after SUBMIT or past the per-turn cap)
    seconds: float = 0.0
    transform: ProgramResult | None = None  # `check_transform`: the turn's `transform` applied to every input

    @property
    def any_timeout(self) -> bool:
        return any(r.status == "timeout" for r in self.results)

    @property
    def any_error(self) -> bool:
        return any(r.status != "ok" for r in self.results)

    @property
    def restarted(self) -> bool:
        return any(r.restarted for r in self.results)


@dataclass
class ProgramResult:
    """Program mode: the completion's `transform` applied to every train and test input, each call time limited."""

    compiled: bool  # a program was found, parsed, and defined a callable `transform`
    code_found: bool = False
    code_parsed: bool = False
    train_outputs: list[Grid | None] = field(default_factory=list)
    test_outputs: list[Grid | None] = field(default_factory=list)
    train_errors: list[str | None] = field(default_factory=list)  # None where the call returned a valid grid
    test_errors: list[str | None] = field(default_factory=list)
    error: str | None = None  # why the program could not be used at all (no code, syntax error, no transform)
    load: ExecResult | None = None  # running the program's top level
    stdout: str = ""  # output of the top level and of the transform calls (each capped)
    seconds: float = 0.0
    num_timeouts: int = 0
    num_crashes: int = 0

    @property
    def errors(self) -> list[str | None]:
        """Per-call errors: the train inputs first, then the test inputs."""
        return self.train_errors + self.test_errors

    @property
    def any_timeout(self) -> bool:
        return self.num_timeouts > 0 or (self.load is not None and self.load.status == "timeout")
