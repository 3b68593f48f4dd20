"""Check a dataclass's field values against its type hints, so that a wrongly typed config value fails up front.

`TrlParser` type-converts command-line flags (and YAML values written as strings), but a YAML value of another type
reaches the dataclass as it is: `sandbox_workers: 2.5`, `sandbox_timeout_s: yes` (True) or `task_ids: 007bbfc7` (a
string where a list is meant) would only fail, or silently misbehave, much later. The check is derived from the
field annotations, so new fields are covered without extra code; annotations it does not understand are accepted.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, Literal, Union

_SCALAR_NAMES = {bool: "bool (true/false)", int: "int", float: "float", str: "str"}


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def type_name(annotation: Any) -> str:
    """A readable name of an annotation: `int`, `list of str`, `float or null`, `one of 'a', 'b'`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {type_name(args[0])}" if args else "list"
    if origin is Literal:
        return "one of " + ", ".join(map(repr, args))
    return _SCALAR_NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def accepts(annotation: Any, value: Any) -> bool:
    """Whether `value` has the type `annotation` describes (bool is not an int or float here)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return True
    if annotation is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(accepts(a, value) for a in args)
    if origin is list:
        return isinstance(value, list) and (not args or all(accepts(args[0], v) for v in value))
    if origin is Literal:
        return value in args
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    return True  # dict, enums, classes: not judged here


def field_type_problems(obj: Any) -> list[str]:
    """One line per field of dataclass `obj` whose value does not match its annotation (key, value, expected)."""
    return value_type_problems(type(obj), {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})


def value_type_problems(cls: type, values: dict[str, Any]) -> list[str]:
    """`field_type_problems` of the values a dataclass `cls` would be built from (`values` may hold other keys
    too: only `cls`'s fields present in it are checked)."""
    problems = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        annotation = hints.get(f.name, Any)
        value = values[f.name]
        if accepts(annotation, value):
            continue
        line = f"{f.name}: got {value!r} ({type(value).__name__}), expected {type_name(annotation)}"
        items = value if isinstance(value, list) else [value]
        if _wants_list(annotation) and isinstance(value, str):
            line += f"; write a YAML list, e.g. {f.name}: [{value}]"
        elif any(isinstance(v, bool) for v in items):
            line += " (YAML reads unquoted yes/no/on/off as booleans)"
        elif any(isinstance(v, (int, float)) for v in items) and "str" in type_name(annotation):
            line += " (YAML reads unquoted 00576224 or 1e3 as numbers: quote text values)"
        problems.append(line)
    return problems


def _wants_list(annotation: Any) -> bool:
    return any(typing.get_origin(a) is list for a in (annotation, *typing.get_args(annotation)))
