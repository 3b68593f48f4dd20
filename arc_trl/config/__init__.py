"""The config room: the keys of a training YAML and everything that reads them before a trainer exists.

    from arc_trl.config import ArcConfig, ArcScriptArguments

- `arc_config.py`: `ArcConfig`, the keys the trainer reads (agent, rewards, REPL, sandbox, teacher, evaluation,
  collapse guard, debugging);
- `script_args.py`: `ArcScriptArguments`, the keys only `arc-trl train` and the launchers read;
- `defaults.py`: every default more than one place uses, written once (it imports nothing: every layer reads it);
- `type_checks.py`: a config value checked against its field annotation; `ineffective_keys.py`: keys set without
  effect, one warning each; `warn_once.py`: a warning said once a process.

The names below are imported on first use (PEP 562): `arc_trl.config.defaults` is read by the sandbox and the data
layer, which must not load `ArcConfig`'s imports with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "ArcConfig": "arc_trl.config.arc_config",
    "ArcScriptArguments": "arc_trl.config.script_args",
}

__all__ = ["ArcConfig", "ArcScriptArguments"]

if TYPE_CHECKING:
    from arc_trl.config.arc_config import ArcConfig
    from arc_trl.config.script_args import ArcScriptArguments


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'arc_trl.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
