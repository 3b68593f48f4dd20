"""`SandboxPool`: creates sessions and bounds how many run code at the same time.

Each session is its own process (forked from the pool's zygote in a few milliseconds); `num_workers` bounds how many
code runs execute concurrently across all sessions (idle sessions cost memory, not CPU), and sizes the thread pools
used by `map_turns` and the asyncio methods. Usable from plain threads and from asyncio.

Cleanup: `close()` (or the context manager) kills every session and the zygote. It also runs when the pool is
garbage-collected and at interpreter exit. If the trainer is killed outright, the zygote sees its control socket
close (or its parent change), kills the sessions and exits; sessions also get SIGKILL when the zygote dies
(PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

from arc_trl.config import defaults
from arc_trl.data.task import ArcTask
from arc_trl.sandbox.config import SandboxConfig
from arc_trl.sandbox.forkserver import ForkServer
from arc_trl.sandbox.results import ProgramResult, TurnResult
from arc_trl.sandbox.session import Session


def _shutdown(forkserver: ForkServer, sessions: weakref.WeakSet, executors: list[ThreadPoolExecutor]) -> None:
    for session in list(sessions):
        try:
            session.close()
        except Exception:  # noqa: BLE001, S110  best effort at exit
            pass
    # pending work is cancelled; running work (a kill, a start) is waited for, unless this runs on one of the threads
    try:
        forkserver.close()  # first: a start or kill still running then finds the zygote closed and returns at once
    finally:  # the threads go even if the zygote could not be stopped
        own = threading.current_thread().name.startswith("sandbox-")
        for executor in executors:
            executor.shutdown(wait=not own, cancel_futures=True)


class PoolClosedError(RuntimeError):
    """The SandboxPool is closed."""


class SandboxPool:
    """Factory of sandboxed sessions sharing one zygote. `with SandboxPool(4, cfg) as pool: ...`.

    It is its sessions' `SessionHost`: `forkserver`, `run_slots`, `note_protections` and `async_executor` are there
    for them.
    """

    def __init__(self, num_workers: int = defaults.SANDBOX_WORKERS, config: SandboxConfig | None = None) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive integer, got {num_workers!r}")
        self.num_workers = num_workers
        self.config = config if config is not None else SandboxConfig()
        self.forkserver = ForkServer(self.config)
        self.run_slots = threading.BoundedSemaphore(num_workers)
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self._executors: list[ThreadPoolExecutor] = []
        self._executor_lock = threading.Lock()
        self._turn_pool: ThreadPoolExecutor | None = None
        self._async_pool: ThreadPoolExecutor | None = None
        self._start_pool: ThreadPoolExecutor | None = None
        self._close_pool: ThreadPoolExecutor | None = None
        self.protections: dict[str, Any] = {}  # what the last started session reported (landlock, seccomp, ...)
        self.closed = False
        self._finalizer = weakref.finalize(self, _shutdown, self.forkserver, self._sessions, self._executors)
        self.forkserver.request({"op": "ping"})  # start the zygote now, so the first session is fast

    def new_session(self, task: ArcTask) -> Session:
        """A fresh interpreter for `task` (only its train pairs and test inputs reach the child)."""
        if self.closed:
            raise PoolClosedError("the SandboxPool is closed")
        session = Session(self, task)
        self._sessions.add(session)
        return session

    def open_sessions(self, tasks: list[ArcTask]) -> list[Session]:
        """A session per task, returned at once; their processes start in the background (`num_workers` threads),
        so a caller can generate meanwhile. A session's first run waits for its start; a start that fails is retried
        by that run and reported in its result (as after a crash), not raised here."""
        if self.closed:
            raise PoolClosedError("the SandboxPool is closed")
        sessions = [Session(self, task, start=False) for task in tasks]
        self._sessions.update(sessions)
        starter = self._executor("_start_pool", "sandbox-start")
        for session in sessions:
            starter.submit(session.start_now)
        return sessions

    def close_sessions(self, sessions: list[Session]) -> None:
        """Close `sessions` now and kill their processes in the background (each kill is a round trip to the zygote,
        ~1 ms, off the caller's critical path)."""
        try:  # `closed` is read under the executors' lock: a pool closed by another thread meanwhile is seen here
            closer = self._executor("_close_pool", "sandbox-close")
        except PoolClosedError:  # the pool's shutdown killed their processes already; close them in place
            closer = None
        for session in sessions:
            session.close(closer)  # a closer shut down meanwhile: the session kills its process in place

    def map_turns(self, items: list[tuple[Session, str]]) -> list[TurnResult]:
        """`session.run_turn(text)` for each (session, text), up to `num_workers` at a time; results in input order.

        A session must appear at most once per call (its turns would otherwise race for its interpreter state).
        """
        items = list(items)
        self._check_distinct(items)
        return list(self._turn_executor().map(lambda item: item[0].run_turn(item[1]), items))

    def map_programs(self, items: list[tuple[Session, str]]) -> list[ProgramResult]:
        """`session.run_program(text)` for each (session, text), up to `num_workers` at a time; results in order."""
        items = list(items)
        self._check_distinct(items)
        return list(self._turn_executor().map(lambda item: item[0].run_program(item[1]), items))

    @staticmethod
    def _check_distinct(items: list[tuple[Session, str]]) -> None:
        ids = [id(session) for session, _ in items]
        if len(set(ids)) != len(ids):
            raise ValueError("the same session appears twice; run its calls one after the other instead")

    def _turn_executor(self) -> ThreadPoolExecutor:
        return self._executor("_turn_pool", "sandbox-turn")

    def async_executor(self) -> ThreadPoolExecutor:
        """The threads that run the sessions' blocking calls for their asyncio methods (created on first use)."""
        return self._executor("_async_pool", "sandbox-async")

    def _executor(self, attribute: str, thread_name: str) -> ThreadPoolExecutor:
        """The pool's `num_workers` threads kept in `attribute`, created on first use (shut down by `close`)."""
        with self._executor_lock:
            if self.closed:
                raise PoolClosedError("the SandboxPool is closed")
            executor = getattr(self, attribute)
            if executor is None:
                executor = ThreadPoolExecutor(self.num_workers, thread_name_prefix=thread_name)
                setattr(self, attribute, executor)
                self._executors.append(executor)
            return executor

    def note_protections(self, protections: dict[str, Any]) -> None:
        """Keep what a freshly started session reported about its confinement (`protections`)."""
        self.protections = {k: v for k, v in protections.items() if k not in ("pid", "work_dir")}

    @property
    def zygote_pid(self) -> int | None:
        return self.forkserver.pid

    def close(self) -> None:
        """Kill every session and the zygote. Idempotent."""
        with self._executor_lock:  # no executor is created after this, so none escapes the shutdown
            self.closed = True
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
