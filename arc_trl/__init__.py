"""arc-trl: fine-tune LLMs into ARC-AGI solvers with GRPO + on-policy distillation, on top of Hugging Face TRL.

    from arc_trl import ArcConfig, ArcGRPOTrainer, build_dataset, load_tasks

The names below are imported on first use (PEP 562), so `import arc_trl` stays light: the sandbox's child processes
and `arc-trl --help` import no torch, TRL or vLLM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "ArcConfig": "arc_trl.config.arc_config",
    "ArcGRPOTrainer": "arc_trl.trainer",
    "ArcTask": "arc_trl.data",
    "load_tasks": "arc_trl.tasks",
    "load_task": "arc_trl.tasks",
    "save_tasks_folder": "arc_trl.data",
    "build_dataset": "arc_trl.data",
    "load_template": "arc_trl.data",
    "generate_curriculum": "arc_trl.synthetic",
    "load_synthetic": "arc_trl.synthetic",
    "resolve_chat_template": "arc_trl.chat_template",
    "SandboxPool": "arc_trl.sandbox",
    "build_tiny_model": "arc_trl.models.tiny_model",
    "import_gguf": "arc_trl.models.gguf_import",
}

__all__ = [  # the same names as _EXPORTS (a literal list, so linters and IDEs see them)
    "__version__", "ArcConfig", "ArcGRPOTrainer", "ArcTask", "load_tasks", "load_task", "save_tasks_folder",
    "build_dataset", "load_template", "generate_curriculum", "load_synthetic", "resolve_chat_template", "SandboxPool",
    "build_tiny_model", "import_gguf",
]

if TYPE_CHECKING:
    from arc_trl.chat_template import resolve_chat_template
    from arc_trl.config.arc_config import ArcConfig
    from arc_trl.data import ArcTask, build_dataset, load_template, save_tasks_folder
    from arc_trl.sandbox import SandboxPool
    from arc_trl.synthetic import generate_curriculum, load_synthetic
    from arc_trl.tasks import load_task, load_tasks
    from arc_trl.models.gguf_import import import_gguf
    from arc_trl.models.tiny_model import build_tiny_model
    from arc_trl.trainer import ArcGRPOTrainer


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'arc_trl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
