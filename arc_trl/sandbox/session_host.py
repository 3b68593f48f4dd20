"""`SessionHost`: what a `Session` needs from the pool that created it (`SandboxPool` is one).

A protocol, so that the session module never imports the pool module (the pool creates sessions).
"""

from __future__ import annotations

from concurrent.futures import Executor
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from arc_trl.sandbox.config import SandboxConfig
    from arc_trl.sandbox.forkserver import ForkServer


class SessionHost(Protocol):
    """The shared machinery behind a pool's sessions."""

    @property
    def config(self) -> SandboxConfig:
        """The settings of every session of the host."""
        ...

    @property
    def forkserver(self) -> ForkServer:
        """Forks the session processes and kills them."""
        ...

    @property
    def run_slots(self) -> AbstractContextManager[Any]:
        """Held while a session runs code: bounds how many code runs execute at the same time across sessions."""
        ...

    def note_protections(self, protections: dict[str, Any]) -> None:
        """Told what a freshly started session process reported about its confinement (landlock, seccomp, ...)."""
        ...

    def async_executor(self) -> Executor:
        """The threads that run the sessions' blocking calls for their asyncio methods."""
        ...
