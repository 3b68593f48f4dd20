"""One registry per extension point, and the config takes its names from it: the agent modes and the rollout
schedulings (`arc_trl/config/choices.py`), the reward modes (`arc_trl.rewards.modes.REWARD_MODE_REGISTRY`), the teacher backends
(`arc_trl.opd.backends.TEACHER_BACKENDS`).

Nowhere else in the package is a list of the same names written (a literal tuple, list, set, `Literal[...]` or dict
keys), nor the registry re-bound or imported from a module that re-exports it (the agent modes were once aliased in
the rollout, the rewards and the prompts, and `generate` imported them from `generation_settings`); `ArcConfig`
accepts every name of its registry and no other, and its help names them all.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from arc_trl.config import ArcConfig
from arc_trl.config.choices import AGENT_MODES, ROLLOUT_SCHEDULINGS
from arc_trl.opd.backends import TEACHER_BACKENDS, build_teacher
from arc_trl.rewards.modes import REWARD_MODE_REGISTRY, REWARD_MODES

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "arc_trl"
USERS = [PACKAGE, ROOT / "lab" / "arc_experiments", ROOT / "scripts", ROOT / "benchmarks"]  # where the names are imported


@dataclass(frozen=True)
class Registry:
    home: str  # the module that writes the names
    names: tuple[str, ...]  # the registry's names (its keys)
    public: tuple[str, ...]  # the module-level names it is reached by
    config_key: str  # the ArcConfig key whose choices it is
    needs: dict  # other ArcConfig keys every name can be tried with


REGISTRIES = {
    "agent modes": Registry("arc_trl.config.choices", tuple(AGENT_MODES), ("AGENT_MODES",), "agent_mode", {}),
    "rollout schedulings": Registry("arc_trl.config.choices", ROLLOUT_SCHEDULINGS, ("ROLLOUT_SCHEDULINGS",),
                                    "rollout_scheduling", {}),
    "reward modes": Registry("arc_trl.rewards.modes", tuple(REWARD_MODE_REGISTRY),
                             ("REWARD_MODE_REGISTRY", "REWARD_MODES"), "reward_mode", {}),
    "teacher backends": Registry("arc_trl.opd.backends", tuple(TEACHER_BACKENDS), ("TEACHER_BACKENDS",),
                                 "teacher_backend", {"teacher_model": "m", "teacher_server_url": "http://localhost:1",
                                                     "teacher_privileged": "solutions"}),
}
parametrize = pytest.mark.parametrize("registry", REGISTRIES.values(), ids=list(REGISTRIES))


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(folders: list[Path]):
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            yield path, ast.parse(path.read_text(), filename=str(path))


def _name_lists(tree: ast.AST):
    """(line, the strings) of every literal collection of two or more string constants (dict literals: their keys)."""
    for node in ast.walk(tree):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and len(items) >= 2 and all(
                isinstance(item, ast.Constant) and isinstance(item.value, str) for item in items):
            yield node.lineno, {item.value for item in items}


@parametrize
def test_the_names_are_written_once_in_the_package(registry):
    found = [f"{_module(path)} line {line}" for path, tree in _sources([PACKAGE])
             for line, strings in _name_lists(tree) if strings == set(registry.names)]
    home = [where for where in found if where.startswith(registry.home + " ")]
    assert len(home) == 1, f"the reader does not see {registry.home}'s own list: {found}"
    assert found == home, "a second list of the names (import them from the registry):\n  " + "\n  ".join(found)


@parametrize
def test_the_registry_is_imported_from_its_home_and_never_re_bound(registry):
    """An import from the registry's module (or its package, which may re-export it), never from a module that merely
    imported it; no module but the home assigns the name."""
    allowed = {registry.home, registry.home.rpartition(".")[0]}
    bad = []
    for path, tree in _sources(USERS):
        module = _module(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module not in allowed:
                bad += [f"{module} line {node.lineno}: from {node.module} import {a.name}" for a in node.names
                        if a.name in registry.public]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and module != registry.home:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bad += [f"{module} line {node.lineno}: {t.id} = ..." for t in targets
                        if isinstance(t, ast.Name) and t.id in registry.public]
    assert not bad, "the registry reached through a copy:\n  " + "\n  ".join(bad)


@parametrize
def test_the_config_accepts_every_name_of_the_registry_and_no_other(registry):
    for name in registry.names:
        assert getattr(ArcConfig(**registry.needs, **{registry.config_key: name}), registry.config_key) == name
    with pytest.raises(ValueError, match=registry.config_key):
        ArcConfig(**registry.needs, **{registry.config_key: "no-such-name"})
    help_text = next(f for f in fields(ArcConfig) if f.name == registry.config_key).metadata["help"]
    assert [name for name in registry.names if name not in help_text] == []


def test_the_commands_offer_the_agent_modes_and_schedulings_of_the_registry():
    from arc_trl.eval.generate import add_generate_arguments
    from arc_trl.rollout.settings import RolloutSettings

    choices = {a.dest: tuple(a.choices) for a in add_generate_arguments(argparse.ArgumentParser())._actions
               if a.choices is not None}
    assert choices["agent_mode"] == tuple(AGENT_MODES)
    assert choices["rollout_scheduling"] == ROLLOUT_SCHEDULINGS
    for name in ROLLOUT_SCHEDULINGS:
        assert RolloutSettings(scheduling=name).scheduling == name
    with pytest.raises(ValueError, match="scheduling"):
        RolloutSettings(scheduling="no-such-name")


def test_each_reward_mode_is_one_entry(toy_task):
    from arc_trl.rewards.modes import compute_reward, highest_reward, lowest_reward
    from arc_trl.rewards.trl_rewards import ArcReward

    assert REWARD_MODES == tuple(REWARD_MODE_REGISTRY)
    for name, mode in REWARD_MODE_REGISTRY.items():
        assert (lowest_reward(name), highest_reward(name)) == (mode.lowest, mode.highest)
        assert mode.lowest < mode.highest
        assert compute_reward(name, None, toy_task) == mode.lowest
        assert ArcReward(name).mode == name


def test_each_teacher_backend_needs_its_key_and_builds_through_the_registry(monkeypatch):
    for name, backend in TEACHER_BACKENDS.items():
        if backend.needs:
            key, _ = backend.needs
            with pytest.raises(ValueError, match=f"teacher_backend={name} needs {key}"):
                ArcConfig(**{**REGISTRIES["teacher backends"].needs, key: None}, teacher_backend=name)
    trainer = type("Trainer", (), {"arc_config": ArcConfig()})()
    assert build_teacher(trainer) is None  # none
    built = []
    monkeypatch.setitem(TEACHER_BACKENDS, "local", TEACHER_BACKENDS["local"].__class__(built.append))
    trainer.arc_config = ArcConfig(teacher_backend="local", teacher_model="m")
    build_teacher(trainer)
    assert built == [trainer]


def test_the_config_loads_the_registries_without_torch():
    """The registries the config reads are light: their builders import the backends when called."""
    code = ("import sys, arc_trl.config.arc_config; "
            "print(sorted(m for m in ('torch', 'trl', 'vllm', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
