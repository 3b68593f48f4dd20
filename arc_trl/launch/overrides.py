"""Dotted-key access into nested config mappings (`model_init_kwargs.dtype` -> config["model_init_kwargs"]["dtype"])."""

from __future__ import annotations

import copy
import re
from typing import Any

_SCIENTIFIC = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


class OverrideError(ValueError):
    """A dotted key cannot be applied to a config."""


def coerce_number(value: Any) -> Any:
    """`"1e-5"` -> `1e-05`: PyYAML reads scientific notation without a dot as a string; fix that one case."""
    if isinstance(value, str) and _SCIENTIFIC.match(value.strip()):
        return float(value)
    return value


def get_dotted(config: dict, key: str, default: Any = None) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_dotted(config: dict, key: str, value: Any) -> None:
    """Set `key` (dotted) in `config`, creating intermediate mappings; refuses to descend into a non-mapping."""
    parts = key.split(".")
    if any(not part for part in parts):
        raise OverrideError(f"invalid key {key!r}: empty part between dots")
    node = config
    for depth, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            prefix = ".".join(parts[: depth + 1])
            raise OverrideError(f"cannot set {key!r}: {prefix!r} is {child!r}, not a mapping")
        node = child
    node[parts[-1]] = value


def apply_overrides(config: dict, overrides: dict[str, Any]) -> dict:
    """A deep copy of `config` with every dotted key of `overrides` set."""
    result = copy.deepcopy(config)
    for key, value in overrides.items():
        set_dotted(result, key, copy.deepcopy(value))
    return result
