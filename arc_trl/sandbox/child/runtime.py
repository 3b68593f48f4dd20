"""The persistent interpreter of one sandbox session: runs model code and answers the trainer's requests.

Requests (JSON, see `wire`):

- `{"op": "exec", "id", "code", "cell", "cpu", "wall"}`: compile and run code in the session namespace; the reply's
  `compiled` says whether it compiled (the trainer never parses the code itself).
- `{"op": "apply", "id", "split": "train"|"test", "index", "cpu", "wall"}`: call the namespace's `transform` on a
  fresh copy of one input grid and validate what it returns.

Each call is limited in-process: a CPU timer (SIGPROF after `cpu` seconds of this process's CPU time) and a
wall-clock backstop (SIGALRM after `wall` seconds, for code that sleeps or blocks) raise `TimeLimitExceeded` inside
the model code, so the session state survives. Every reply carries `cpu_total`, the process's CPU time so far, which
the trainer uses to kill the process when its CPU time passes the limit by a grace period anyway (C code that never
returns to the interpreter, code that swallows the exception).
"""

from __future__ import annotations

import builtins
import linecache
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import audit_hook
import grids
import numpy as np
import wire

_HIDDEN_FILES = {__file__, grids.__file__}
_REPEAT_S = 0.05  # after the first timeout signal, repeat it so code that swallows one still stops
_MAX_LINECACHE_CELLS = 64
_TRACEBACK_FRAMES = 100  # the innermost frames shown (a deep recursion would otherwise take seconds to format)


class TimeLimitExceeded(BaseException):
    """Raised inside model code when a call exceeds its wall-clock or CPU time limit (not an `Exception`)."""


TimeLimitExceeded.__module__ = "builtins"  # tracebacks show `TimeLimitExceeded: ...`


class SubmitError(ValueError):
    """Raised by SUBMIT when the submission is malformed; the episode continues."""


SubmitError.__module__ = "builtins"  # tracebacks show `SubmitError: ...`


class InvalidOutput(ValueError):
    """`transform` returned something that is not a valid grid."""


InvalidOutput.__module__ = "builtins"  # tracebacks show `InvalidOutput: ...`


class _SubmitAccepted(BaseException):
    """Ends the current code after a valid SUBMIT."""


class CappedWriter:
    """A text stream that keeps the first `limit` characters and only counts the rest (a 100 MB print is cheap)."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.reset()

    def reset(self) -> None:
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0

    def write(self, text: Any) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        n = str.__len__(text)
        room = self.limit - self._kept
        if room > 0:
            part = str.__getitem__(text, slice(0, room))
            self._parts.append(part)
            self._kept += str.__len__(part)
        self.dropped += max(0, n - max(room, 0))
        return n

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("the sandbox output stream has no file descriptor")

    def text(self) -> str:
        out = "".join(self._parts)
        if self.dropped:
            out += f"\n[... output truncated: {self.dropped} more characters not shown ...]\n"
        return out.encode("utf-8", "replace").decode("utf-8")


class Session:
    """State of one episode: the namespace, the task inputs, the output streams and the submission."""

    def __init__(self, setup: dict[str, Any]) -> None:
        config = setup["config"]
        self.max_output = int(config["max_output_chars"])
        self.memory_mb = int(config["memory_mb"])
        self.inputs = {"train": setup["train_inputs"], "test": setup["test_inputs"]}
        self.n_test = len(setup["test_inputs"])
        self.stdout = CappedWriter(self.max_output)
        self.stderr = CappedWriter(self.max_output)
        self.submitted: list | None = None
        self.submit_error: str | None = None
        self.in_user = False
        self.limit_kind: str | None = None
        self.limit_text = ""
        self.namespace: dict[str, Any] = {
            "__name__": "__main__",
            "__builtins__": builtins,
            "np": np,
            "train_inputs": [np.array(g, dtype=int) for g in setup["train_inputs"]],
            "train_outputs": [np.array(g, dtype=int) for g in setup["train_outputs"]],
            "test_inputs": [np.array(g, dtype=int) for g in setup["test_inputs"]],
            "SUBMIT": self._make_submit(),
        }
        self._cells: list[str] = []
        _cap_recursion_limit(int(config["max_recursion_depth"]))

    # --- SUBMIT

    def _make_submit(self) -> Callable[[Any], None]:
        session = self

        def SUBMIT(predictions: Any) -> None:
            """Submit the predicted output grids, one per test input, in order (lists of lists or numpy arrays).

            A single grid is accepted when there is exactly one test input. A valid submission ends the episode;
            a malformed one raises SubmitError explaining the problem, and you can try again.
            """
            try:
                result = grids.to_submission(predictions, session.n_test)
            except grids.GridError as e:
                session.submit_error = f"SUBMIT rejected: {e}"
                raise SubmitError(session.submit_error) from None
            session.submitted = result
            session.submit_error = None
            raise _SubmitAccepted()

        return SUBMIT

    # --- time limits

    def _on_signal(self, signum: int, frame: Any) -> None:
        # only interrupt model code (or library code it called), never the sandbox's own bookkeeping
        if not self.in_user or (frame is not None and frame.f_code.co_filename == __file__):
            return
        self.limit_kind = "wall_time" if signum == signal.SIGALRM else "cpu_time"
        raise TimeLimitExceeded(self.limit_text if signum == signal.SIGALRM else self.limit_text_cpu)

    def _arm(self, cpu: float, wall: float) -> None:
        self.limit_kind = None
        self.limit_text = (f"execution exceeded the wall-clock limit of {wall:g} s (the code was sleeping or "
                           f"waiting; the CPU time limit is {cpu:g} s)")
        self.limit_text_cpu = f"execution exceeded the CPU time limit of {cpu:g} s"
        signal.signal(signal.SIGALRM, self._on_signal)
        signal.signal(signal.SIGPROF, self._on_signal)
        signal.setitimer(signal.ITIMER_REAL, wall, _REPEAT_S)
        signal.setitimer(signal.ITIMER_PROF, cpu, _REPEAT_S)

    def _disarm(self) -> None:
        self.in_user = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)

    # --- running model code

    def _call(self, fn: Callable[[], Any], cpu: float, wall: float) -> tuple[str, str | None, Any]:
        """Run `fn` as model code: streams redirected, time limited, every exception turned into a status."""
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.stdout, self.stderr
        try:
            self._arm(cpu, wall)
            self.in_user = True
            try:
                return "ok", None, fn()
            except _SubmitAccepted:
                return "ok", None, None
            except TimeLimitExceeded as e:
                self._disarm()
                kind = self.limit_kind or "wall_time"
                self._write_exception(e)
                return "timeout", kind, None
            except MemoryError as e:
                self._disarm()
                self._write_exception(e, note=f"out of memory (limit {self.memory_mb} MB)")
                return "memory", "MemoryError", None
            except BaseException as e:  # noqa: BLE001  everything model code raises is reported, nothing escapes
                self._write_exception(e)  # still under the timers: formatting may run model code (__str__)
                self._disarm()
                if isinstance(e, (audit_hook.SandboxRefused, audit_hook.SandboxImportRefused)):
                    return "refused", "refused", None
                return "error", type(e).__name__, None
        finally:
            self._disarm()
            sys.stdout, sys.stderr = saved

    def _write_exception(self, exc: BaseException, note: str | None = None) -> None:
        try:
            text = format_exception(exc)
            if note:
                text = text.rstrip("\n") + f"\n[{note}]\n"
        except BaseException:  # noqa: BLE001  hostile __str__ / __repr__, or a timeout while formatting
            text = f"{type(exc).__name__}: {note or '(error message unavailable)'}\n"
        self.stderr.write(text)

    def execute(self, request: dict[str, Any]) -> dict[str, Any]:
        self.stdout.reset()
        self.stderr.reset()
        self.submit_error = None
        self.submitted = None
        name = f"<cell-{int(request['cell'])}>"
        code = request["code"]
        start = time.perf_counter()
        try:
            compiled = compile(code, name, "exec")
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as e:
            self.stderr.write("".join(traceback.format_exception_only(type(e), e)))
            reply = self._reply(request, "error", "SyntaxError", start)
            reply["compiled"] = False
            return reply
        self._remember_source(name, code)
        run = lambda: exec(compiled, self.namespace)  # noqa: S102  (running model code is the point)
        status, kind, _ = self._call(run, request["cpu"], request["wall"])
        reply = self._reply(request, status, kind, start)
        reply["compiled"] = True
        return reply

    def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        self.stdout.reset()
        self.stderr.reset()
        start = time.perf_counter()
        fn = self.namespace.get("transform")
        if not callable(fn):
            reply = self._reply(request, "error", "NoTransform", start)
            reply.update(output=None, error="no callable named `transform` is defined")
            return reply
        grid = np.array(self.inputs[request["split"]][int(request["index"])], dtype=int)

        def job() -> list[list[int]]:
            out = fn(grid)
            try:
                return grids.to_grid(out)
            except grids.GridError as e:
                raise InvalidOutput(f"transform returned an invalid grid: {e}") from None

        status, kind, output = self._call(job, request["cpu"], request["wall"])
        reply = self._reply(request, status, kind, start)
        reply["output"] = output if status == "ok" else None
        reply["error"] = None if status == "ok" else _last_line(reply["stderr"]) or status
        return reply

    def _reply(self, request: dict[str, Any], status: str, kind: str | None, start: float) -> dict[str, Any]:
        return {
            "id": request["id"],
            "status": status,
            "error_kind": kind,
            "stdout": self.stdout.text(),
            "stderr": self.stderr.text(),
            "truncated": bool(self.stdout.dropped or self.stderr.dropped),
            "seconds": time.perf_counter() - start,
            "submitted": self.submitted,
            "submit_error": self.submit_error,
            "has_transform": callable(self.namespace.get("transform")),
            "cpu_total": time.process_time(),
        }

    def _remember_source(self, name: str, code: str) -> None:
        """Make tracebacks show the model's source lines."""
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        self._cells.append(name)
        if len(self._cells) > _MAX_LINECACHE_CELLS:
            linecache.cache.pop(self._cells.pop(0), None)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "exec":
            return self.execute(request)
        if op == "apply":
            return self.apply(request)
        if op == "ping":
            return {"id": request.get("id"), "pong": True}
        return {"id": request.get("id"), "status": "error", "error_kind": "internal", "stderr": f"unknown op {op!r}"}


def _cap_recursion_limit(cap: int) -> None:
    """Model code may raise the recursion limit up to `cap` only (deeper recursion through C code segfaults)."""
    original = sys.setrecursionlimit

    def setrecursionlimit(limit: int) -> None:
        """Set the maximum depth of the Python interpreter stack (capped in the sandbox)."""
        original(min(int(limit), cap))

    sys.setrecursionlimit = setrecursionlimit


def format_exception(exc: BaseException) -> str:
    """The traceback of model code, without the sandbox's own frames."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, limit=-_TRACEBACK_FRAMES)
    _strip_frames(te)
    return "".join(te.format())


def _strip_frames(te: traceback.TracebackException) -> None:
    seen = set()
    while te is not None and id(te) not in seen:
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename not in _HIDDEN_FILES])
        te = te.__cause__ or te.__context__


def _last_line(text: str) -> str | None:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:500] if lines else None


def serve(fd: int, session: Session) -> None:
    """Answer requests until the trainer closes the channel."""
    while True:
        try:
            request = wire.receive(fd)
        except BaseException:  # noqa: BLE001  channel closed: the session is over
            return
        try:
            reply = session.handle(request)
        except BaseException as e:  # noqa: BLE001
            session._disarm()
            reply = {"id": request.get("id") if isinstance(request, dict) else None, "status": "error",
                     "error_kind": "internal", "stdout": "", "stderr": f"sandbox internal error: {type(e).__name__}\n"}
        try:
            wire.send(fd, reply)
        except BaseException:  # noqa: BLE001  cannot answer (channel gone, or out of memory): give up
            return
