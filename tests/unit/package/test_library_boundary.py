"""The library stands alone: `arc_trl` (what the wheel ships) never reaches `arc_experiments` (the experiments built on
it, run from a checkout as `python -m arc_experiments...`), neither by an import nor by a string naming it (a module
path handed to importlib, a `python -m` command line), and the wheel's packages are `arc_trl`'s alone."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_no_file_of_arc_trl_names_arc_experiments():
    hits = []
    for path in sorted((ROOT / "arc_trl").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        for number, line in enumerate(path.read_bytes().decode(errors="replace").splitlines(), 1):
            if "arc_experiments" in line or "arc-experiments" in line:
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "arc_trl reaches arc_experiments (the library must not depend on its experiments):\n  " + \
        "\n  ".join(hits)


def test_the_wheel_packages_arc_trl_only():
    """What `pip install .` puts on sys.path: setuptools' package discovery with pyproject.toml's settings."""
    from setuptools import find_namespace_packages, find_packages

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    find = find_namespace_packages if settings.get("namespaces", True) else find_packages
    packages = find(where=str(ROOT), include=settings.get("include", ["*"]), exclude=settings.get("exclude", ()))
    assert "arc_trl" in packages and "arc_trl.cli" in packages
    assert [p for p in packages if p.split(".")[0] != "arc_trl"] == []
