"""Warnings said once a process: the config is checked by the parser and again by the trainer, and a rollout
fallback is met on every step; the user needs each message once."""

from __future__ import annotations

import logging

said: set[tuple[str, str]] = set()  # (logger name, message) already logged by this process


def warn_once(logger: logging.Logger, message: str) -> bool:
    """Log `message` at WARNING on `logger` unless this process already did; whether it logged now."""
    key = (logger.name, message)
    if key in said:
        return False
    said.add(key)
    logger.warning(message)
    return True
