"""The time budgets of a test-time run: seconds of training per task, and seconds for the whole run.

`Budget.allowance()` is asked before each task: whether it may start (not once the total, less the reserve, is
spent) and how long its training may take (the per-task cap, cut to what the total has left). The clock is
injectable, so the rules are tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Allowance:
    """What the next task may do: start or not (`reason` says why not), and its training seconds (None: no cap)."""

    start: bool
    train_seconds: float | None = None
    reason: str = ""


@dataclass
class Budget:
    task_seconds: float | None = None  # training seconds per task (None: none)
    total_seconds: float | None = None  # the whole run's seconds from `begin()` (None: none)
    reserve_seconds: float = 0.0  # held back from the total for the last task's attempts and the submission
    clock: Callable[[], float] = time.monotonic
    started: float | None = field(default=None, init=False)

    def begin(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        if self.started is None:
            self.begin()
        return self.clock() - self.started

    def remaining(self) -> float | None:
        """Seconds of the total budget left for training (the reserve taken off); None without a total budget."""
        if self.total_seconds is None:
            return None
        return self.total_seconds - self.reserve_seconds - self.elapsed()

    def allowance(self) -> Allowance:
        left = self.remaining()
        if left is not None and left <= 0:
            return Allowance(False, reason=f"total budget spent ({self.elapsed():.1f} s of total_max_seconds "
                                           f"{self.total_seconds:g}, reserve_seconds {self.reserve_seconds:g})")
        caps = [c for c in (self.task_seconds, left) if c is not None]
        return Allowance(True, min(caps) if caps else None)
