"""Stable, filesystem-safe run names from a template and the varied values of a run.

A template is plain text with `{key}` placeholders, where `key` is a varied (dotted) key, `variant` (the variant's
name) or `index` (the run's position in the sweep, zero-padded to 3 digits). `{key:fmt}` applies a Python format
spec to the raw value (e.g. `{learning_rate:.0e}`).
"""

from __future__ import annotations

import re
from typing import Any

MAX_NAME_LENGTH = 200
_PLACEHOLDER = re.compile(r"\{([^{}:]+)(?::([^{}]*))?\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def format_value(value: Any) -> str:
    """Compact text for a value: floats via `repr` (shortest round-trip: 1e-05, 0.3, 2.5e-06), bools lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "-".join(format_value(item) for item in value)
    if isinstance(value, dict):
        return "-".join(f"{key}{format_value(item)}" for key, item in value.items())
    return str(value)


def sanitize(name: str) -> str:
    """Replace every run of characters outside `[A-Za-z0-9._+-]` by one '-', trimmed of leading/trailing '-'."""
    return _UNSAFE.sub("-", name).strip("-")


def default_template(varied_keys: list[str], has_variants: bool) -> str:
    """`{variant}_lr...`: the variant name, then `<last part of key><value>` per varied key, joined by '_'."""
    parts = ["{variant}"] if has_variants else []
    parts += [f"{key.split('.')[-1]}{{{key}}}" for key in varied_keys]
    return "_".join(parts) or "{index}"


def template_keys(template: str) -> list[str]:
    return [match.group(1) for match in _PLACEHOLDER.finditer(template)]


def render_name(template: str, values: dict[str, Any]) -> str:
    """Fill `template` from `values` and sanitize the result. Raises KeyError naming the first unknown placeholder."""

    def fill(match: re.Match) -> str:
        key, spec = match.group(1), match.group(2)
        if key not in values:
            raise KeyError(key)
        value = values[key]
        return format(value, spec) if spec else format_value(value)

    return sanitize(_PLACEHOLDER.sub(fill, template))
