"""The teacher interface: completion-region log-probs of given token sequences."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol


class TeacherUnavailableError(RuntimeError):
    """The teacher (server) could not be reached or answered wrongly after bounded retries."""


class Teacher(Protocol):
    def score(self, sequences: list[list[int]], prompt_lengths: list[int]) -> list[list[float]]:
        """For each sequence, the log-prob of every token from `prompt_lengths[i]` on (NaN where unavailable)."""

    def submit(self, sequences: list[list[int]], prompt_lengths: list[int]) -> Future:
        """Start `score` without blocking (servers overlap it with generation); the future yields its result."""
