"""The public Python API: `from arc_trl import ...` gives the trainer, the config and the task helpers, and importing
the package alone stays light (no torch, TRL or vLLM: the sandbox's child processes and `arc-trl --help` import it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_public_names_are_the_defining_modules_objects():
    import arc_trl
    from arc_trl import ArcConfig, ArcGRPOTrainer, build_dataset, load_tasks
    from arc_trl.config import ArcConfig as Config
    from arc_trl.data import build_dataset as build
    from arc_trl.tasks import load_tasks as load
    from arc_trl.trainer.arc_grpo_trainer import ArcGRPOTrainer as Trainer

    assert (ArcConfig, ArcGRPOTrainer, build_dataset, load_tasks) == (Config, Trainer, build, load)
    assert set(arc_trl.__all__) == {"__version__", *arc_trl._EXPORTS} and set(dir(arc_trl)) >= set(arc_trl.__all__)
    for name in arc_trl._EXPORTS:
        assert getattr(arc_trl, name) is not None, name


def test_one_function_loads_tasks():
    """`arc_trl.load_tasks` (arc_trl/tasks.py: every spec) is the only function of that name in the package."""
    defined = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "arc_trl").rglob("*.py")
                     if re.search(r"^def load_tasks?\(", path.read_text(), flags=re.M))
    assert defined == ["arc_trl/tasks.py"]


def test_unknown_name_raises_attribute_error():
    import arc_trl

    try:
        arc_trl.NoSuchThing  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("no AttributeError")


def test_import_arc_trl_imports_no_torch():
    code = "import sys, arc_trl; print(sorted(m for m in ('torch', 'trl', 'vllm', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
