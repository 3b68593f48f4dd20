"""One episode's persistent interpreter, seen from the trainer.

Only the train pairs and the test inputs of the task are sent to the child; the test outputs never leave the
trainer. Every reply is read with a size cap and a deadline (`child_handle`) and validated field by field. When the
child dies, is killed for running past its time limit, or breaks the protocol, the caller gets a result saying so,
and the session is transparently replaced by a fresh interpreter for the same task (state lost; the result's note
tells the model).
"""

from __future__ import annotations

import asyncio
import functools
import signal
import socket
import struct
import threading
import time
import weakref
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Self

from arc_trl.data.task import ArcTask, Grid, normalize_grid
from arc_trl.sandbox.child import wire
from arc_trl.sandbox.child_handle import ChildHandle, ChildLost, describe_exit, exit_kind, kill_child, resident_mb
from arc_trl.sandbox.code_blocks import defines_transform, extract_code_blocks, extract_program, parses
from arc_trl.sandbox.forkserver import SandboxError
from arc_trl.sandbox.observation import NO_CODE, NO_OUTPUT, format_turn
from arc_trl.sandbox.results import STATUSES, ExecResult, ProgramResult, TurnResult
from arc_trl.sandbox.transform_check import transform_verdict

if TYPE_CHECKING:
    from arc_trl.sandbox.session_host import SessionHost

RESTART_NOTE = ("the interpreter was restarted and its state was lost: variables, functions and imports from earlier "
                "code are gone; np, train_inputs, train_outputs, test_inputs and SUBMIT are available again")
_SEND_TIMEOUT_S = 10.0
_MAX_ERROR_KIND = 100


class Session:
    """A persistent sandboxed interpreter for one task. Create it with `SandboxPool.new_session(task)` (or
    `open_sessions`).

    `pool`: the `SessionHost` that runs it (the `SandboxPool` that created it). `start=False` defers starting the
    process to `start_now` or the first run (`SandboxPool.open_sessions` starts it in the background).
    """

    def __init__(self, pool: SessionHost, task: ArcTask, start: bool = True) -> None:
        self.pool = pool
        self.config = pool.config
        self.task_id = task.id
        self.n_train = len(task.train)
        self.n_test = len(task.test_inputs)
        # Deliberately built from the inputs only: task.test_outputs must never reach the child.
        self._setup = {
            "op": "setup",
            "config": self.config.child_settings(),
            "train_inputs": [normalize_grid(p.input) for p in task.train],
            "train_outputs": [normalize_grid(p.output) for p in task.train],
            "test_inputs": [normalize_grid(g) for g in task.test_inputs],
        }
        self._lock = threading.RLock()
        self._child: ChildHandle | None = None
        self._next_id = 0
        self._cell = 0
        self.submitted: list[Grid] | None = None  # the last valid SUBMIT of this session
        self.restarts = 0
        self.closed = False
        self.protections: dict[str, Any] = {}
        if start:
            self._start()

    # --- process management

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid, work_dir, generation = self.pool.forkserver.spawn(theirs)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(_SEND_TIMEOUT_S), 0))
        child = ChildHandle(pid, ours, work_dir, generation)
        child.finalizer = weakref.finalize(child, kill_child, self.pool.forkserver, pid, generation, ours, work_dir)
        try:
            wire.send(ours.fileno(), self._setup)
            ready = wire.receive(ours.fileno(), max_bytes=1 << 16,
                                 deadline=time.monotonic() + self.config.start_timeout_s)
            if not isinstance(ready, dict) or ready.get("ready") is not True:
                raise wire.WireError(f"unexpected first message {str(ready)[:200]!r}")
        except (OSError, wire.WireError) as e:
            info = self._kill(child)
            raise SandboxError(f"a sandbox session for task {self.task_id!r} did not start: {e} "
                               f"({describe_exit(info) or 'no exit status'})") from None
        protections = ready.get("protections")
        self.protections = protections if isinstance(protections, dict) else {}
        self.pool.note_protections(self.protections)
        self._child = child

    def _kill(self, child: ChildHandle) -> dict[str, Any]:
        return (child.finalizer() if child.finalizer is not None else None) or {}

    def _ensure_child(self) -> str | None:
        """Start a child if there is none; returns an error message when that fails."""
        if self._child is not None:
            return None
        try:
            self._start()
            return None
        except SandboxError as e:
            return str(e)

    def start_now(self) -> None:
        """Start the process unless it runs already or the session is closed. A failure is left for the first run,
        which retries and reports it in its result (`SandboxPool.open_sessions` calls this in the background)."""
        with self._lock:
            if not self.closed:
                self._ensure_child()

    # --- request / reply

    def _request(self, message: dict[str, Any], cpu_s: float, wall_s: float) -> dict[str, Any]:
        """Send one request with its limits and read the reply (raises ChildLost)."""
        child = self._child
        assert child is not None
        self._next_id += 1
        message.update(id=self._next_id, cpu=cpu_s, wall=wall_s)
        return child.request(message, cpu_s, wall_s, self.config.kill_grace_s, self.config.max_reply_bytes)

    def _validated(self, reply: dict[str, Any]) -> ExecResult:
        """Turn a child's reply into an ExecResult, trusting nothing (raises ChildLost('protocol'))."""
        status = reply.get("status")
        if status not in STATUSES or status == "crashed":
            raise ChildLost("protocol", f"invalid status {str(status)[:50]!r}")
        limit = self.config.max_output_chars + 200
        texts = {}
        for key in ("stdout", "stderr"):
            value = reply.get(key, "")
            if not isinstance(value, str):
                raise ChildLost("protocol", f"{key} is not text")
            texts[key] = _clean_text(value[:limit])
        kind = reply.get("error_kind")
        kind = _clean_text(kind[:_MAX_ERROR_KIND]) if isinstance(kind, str) else None
        submit_error = reply.get("submit_error")
        submit_error = _clean_text(submit_error[:2000]) if isinstance(submit_error, str) else None
        submitted = None
        if reply.get("submitted") is not None:
            submitted = self._valid_submission(reply["submitted"])
            if submitted is None:
                submit_error = "SUBMIT rejected: the submission is not a valid list of grids"
        return ExecResult(
            status=status, stdout=texts["stdout"], stderr=texts["stderr"], error_kind=kind,
            truncated=reply.get("truncated") is True, submitted=submitted, submit_error=submit_error,
            has_transform=reply.get("has_transform") is True, compiled=reply.get("compiled") is True,
        )

    def _valid_submission(self, value: Any) -> list[Grid] | None:
        if not isinstance(value, list) or len(value) != self.n_test:
            return None
        try:
            return [normalize_grid(g) for g in value]
        except (ValueError, TypeError):
            return None

    def _recover(self, lost: ChildLost) -> ExecResult:
        """The child is gone or unusable: kill it, describe what happened, start a fresh one."""
        child, self._child = self._child, None
        info = self._kill(child) if child is not None else {}
        sig = info.get("signal")
        if lost.kind == "timeout":
            status, kind = "timeout", "hard_timeout"
            what = f"execution exceeded {lost.detail} and the interpreter had to be killed"
        elif sig == signal.SIGXCPU:
            status, kind = "timeout", "session_cpu"
            what = f"the session used up its total CPU budget ({self.config.session_cpu_s} s)"
        elif lost.kind == "protocol":
            status, kind = "crashed", "protocol"
            what = "the interpreter sent an invalid reply and was stopped"
        else:
            status, kind = "crashed", exit_kind(info)
            what = f"the interpreter {describe_exit(info) or 'died'}"
        self.restarts += 1
        error = self._ensure_child()
        if error is None:
            note = f"{what}; {RESTART_NOTE}"
        else:
            note = f"{what}; the sandbox could not be restarted ({error}); the next code run will try again"
        return ExecResult(status=status, error_kind=kind, restarted=error is None, note=note)

    # --- public API

    def run(self, code: str, timeout_s: float | None = None) -> ExecResult:
        """Run one code string in the persistent namespace. `timeout_s`: its CPU time limit (None: the config's);
        the wall-clock backstop follows from it (`SandboxConfig.time_limits`)."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        with self._lock:
            self._check_open()
            start = time.perf_counter()
            if len(code) > self.config.max_code_chars:  # before anything looks at the code (no parsing)
                return ExecResult(status="refused", error_kind="code_too_long", note=(
                    f"the code is {len(code)} characters long; the limit is {self.config.max_code_chars}; "
                    "it was not run"))
            error = self._ensure_child()
            if error is not None:
                return ExecResult(status="crashed", error_kind="unavailable", compiled=parses(code),
                                  note=f"the sandbox is unavailable: {error}")
            cpu, wall = self.config.time_limits(timeout_s)
            self._cell += 1
            message = {"op": "exec", "code": code, "cell": self._cell}
            with self.pool.run_slots:
                try:
                    result = self._validated(self._request(message, cpu, wall))
                except ChildLost as lost:
                    result = self._recover(lost)
                    result.compiled = parses(code)  # the child could not say (rare): at most max_code_chars
            self._check_idle_memory(result)
            result.seconds = time.perf_counter() - start
            if result.status == "timeout" and not result.note and result.error_kind in ("wall_time", "cpu_time"):
                result.note = "execution was stopped at the time limit; the interpreter state is kept"
            if result.submitted is not None:
                self.submitted = result.submitted
            return result

    def _check_idle_memory(self, result: ExecResult) -> None:
        """Restart the interpreter when it keeps more than `idle_memory_mb` resident between runs (idle sessions'
        memory adds up over a batch); the result says so."""
        limit = self.config.idle_memory_mb
        if limit is None or self._child is None or result.restarted:
            return
        resident = resident_mb(self._child.pid)
        if resident is None or resident <= limit:
            return
        child, self._child = self._child, None
        self._kill(child)
        self.restarts += 1
        error = self._ensure_child()
        what = (f"the interpreter kept {resident:.0f} MB of memory after this run, more than the limit of {limit} MB "
                "(idle_memory_mb)")
        result.restarted = error is None
        result.note = f"{what}; {RESTART_NOTE}" if error is None else (
            f"{what} and was stopped; the sandbox could not be restarted ({error}); the next code run will try again")

    def run_turn(self, text: str, max_blocks: int | None = None) -> TurnResult:
        """Run the code blocks of one assistant message in order; stop after a valid SUBMIT. With
        `config.check_transform`, a message that defines `transform` and makes no SUBMIT gets it checked on the train
        pairs, and its test outputs submitted when it reproduces them all (`arc_trl.sandbox.transform_check`)."""
        return self.run_blocks(extract_code_blocks(text, max_chars=self.config.max_code_chars), max_blocks)

    def run_blocks(self, blocks: list[str], max_blocks: int | None = None) -> TurnResult:
        """`run_turn` on code blocks already extracted from the message (`extract_code_blocks`)."""
        start = time.perf_counter()
        if not blocks:
            return TurnResult(observation=NO_CODE, code_found=False, code_parsed=False)
        cap = max_blocks if max_blocks is not None else self.config.max_blocks_per_turn
        results: list[ExecResult] = []
        submitted = None
        for code in blocks[:cap]:
            result = self.run(code)
            results.append(result)
            if result.submitted is not None:
                submitted = result.submitted
                break
        skipped_after_submit = len(blocks[:cap]) - len(results)
        observation = format_turn(results, len(blocks), skipped_after_submit, max(0, len(blocks) - cap))
        checked = None
        if (submitted is None and self.config.check_transform and results[-1].has_transform
                and any(defines_transform(code) for code in blocks[:len(results)])):
            checked = self.apply_transform()  # a call that kills the interpreter fails the calls after it
            submitted, verdict = transform_verdict(checked, self._setup["train_outputs"])
            observation = verdict if observation == NO_OUTPUT else f"{observation}\n{verdict}"
            if submitted is not None:
                self.submitted = submitted
        return TurnResult(
            observation=observation, code_found=True, code_parsed=any(r.compiled for r in results), submitted=submitted,
            results=results, n_blocks=len(blocks), seconds=time.perf_counter() - start, transform=checked,
        )

    def run_program(self, text: str) -> ProgramResult:
        """Program mode: run the completion's code, then apply `transform` to every train and test input."""
        return self.run_program_code(extract_program(text, max_chars=self.config.max_code_chars))

    def run_program_code(self, code: str | None) -> ProgramResult:
        """`run_program` on the program already extracted from the completion (`extract_program`; None: none)."""
        start = time.perf_counter()
        if code is None:
            return self._no_program("no Python code found", start, code_found=False, code_parsed=False)
        load = self.run(code)
        if not load.compiled:
            if load.error_kind == "code_too_long":
                reason = f"the program was not run: {load.note}"
            else:
                reason = f"the program does not parse: {_last_line(load.stderr) or load.note or load.status}"
            return self._no_program(reason, start, code_found=True, code_parsed=False, load=load)
        if not load.has_transform:
            reason = "the program does not define a callable `transform`"
            if load.status != "ok":
                reason += f" ({_last_line(load.stderr) or load.note or load.status})"
            return self._no_program(reason, start, code_found=True, code_parsed=True, load=load)
        result = self.apply_transform(reload_code=code)
        result.code_found = result.code_parsed = True
        result.load = load
        result.stdout = load.stdout + result.stdout
        result.seconds = time.perf_counter() - start
        return result

    def apply_transform(self, reload_code: str | None = None) -> ProgramResult:
        """Call the namespace's `transform` on each train input, then each test input (each call time limited).

        When a call kills the interpreter, it is restarted and `reload_code` (the program) is run again before the
        next call; without it the remaining calls fail.
        """
        start = time.perf_counter()
        result = ProgramResult(compiled=True)
        limit = self.config.transform_timeout_s  # CPU seconds per call
        stdout_parts = []
        for split, count in (("train", self.n_train), ("test", self.n_test)):
            outputs = result.train_outputs if split == "train" else result.test_outputs
            errors = result.train_errors if split == "train" else result.test_errors
            for index in range(count):
                output, error, reply_stdout, lost = self._apply_one(split, index, limit)
                outputs.append(output)
                errors.append(error)
                if reply_stdout:
                    stdout_parts.append(reply_stdout)
                if lost is not None:
                    result.num_timeouts += lost.status == "timeout"
                    result.num_crashes += lost.status == "crashed"
                    if reload_code is None or self.run(reload_code).has_transform is not True:
                        reload_code = None
                elif error and error.startswith("timeout"):
                    result.num_timeouts += 1
        result.stdout = "".join(stdout_parts)
        result.seconds = time.perf_counter() - start
        return result

    def _apply_one(
        self, split: str, index: int, limit: float
    ) -> tuple[Grid | None, str | None, str, ExecResult | None]:
        """(output, error, stdout, recovery result when the child was lost) for one transform call."""
        with self._lock:
            self._check_open()
            error = self._ensure_child()
            if error is not None:
                return None, f"crashed: the sandbox is unavailable ({error})", "", None
            message = {"op": "apply", "split": split, "index": index}
            with self.pool.run_slots:
                try:
                    reply = self._request(message, *self.config.time_limits(limit))
                    result = self._validated(reply)
                except ChildLost as lost:
                    recovered = self._recover(lost)
                    return None, f"{recovered.status}: {recovered.note}", "", recovered
        if result.status == "ok":
            output = reply.get("output")
            try:
                return normalize_grid(output), None, result.stdout, None
            except (ValueError, TypeError):
                return None, "error: invalid output", result.stdout, None
        detail = reply.get("error")
        detail = _clean_text(detail[:500]) if isinstance(detail, str) else result.status
        prefix = "timeout" if result.status == "timeout" else result.status
        return None, f"{prefix}: {detail}", result.stdout, None

    def _no_program(self, reason: str, start: float, **kwargs: Any) -> ProgramResult:
        return ProgramResult(
            compiled=False, train_outputs=[None] * self.n_train, test_outputs=[None] * self.n_test,
            train_errors=[reason] * self.n_train, test_errors=[reason] * self.n_test, error=reason,
            seconds=time.perf_counter() - start, **kwargs,
        )

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"the sandbox session for task {self.task_id!r} is closed")

    # --- asyncio

    async def arun(self, code: str, timeout_s: float | None = None) -> ExecResult:
        return await self._in_thread(functools.partial(self.run, code, timeout_s))

    async def arun_turn(self, text: str, max_blocks: int | None = None) -> TurnResult:
        return await self._in_thread(functools.partial(self.run_turn, text, max_blocks))

    async def arun_program(self, text: str) -> ProgramResult:
        return await self._in_thread(functools.partial(self.run_program, text))

    async def _in_thread(self, fn: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool.async_executor(), fn)

    # --- closing

    def close(self, executor: Executor | None = None) -> None:
        """Kill the interpreter and delete its working directory. Idempotent. With `executor`, the session is closed
        at once and the kill (a round trip to the zygote) runs there (`SandboxPool.close_sessions`)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            child, self._child = self._child, None
            if child is not None and executor is None:
                self._kill(child)
        if child is not None and executor is not None:
            try:
                executor.submit(self._kill, child)  # if the pool closes first, the zygote's exit kills the process
            except RuntimeError:  # the executor is shut down (the pool is closing): kill it here
                self._kill(child)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _clean_text(text: str) -> str:
    """Valid UTF-8 text (lone surrogates from hostile output replaced)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else None
