"""Every script, benchmark, `python -m` main, console command and `arc-trl` subcommand answers `--help` with exit 0 and a usage line.

`--help` is the first thing a user types; argparse formats help strings with `%`, so a stray percent sign in a
field's help (ArcConfig's `defer_old_logps` once said "~8-10% of a step") crashes it with a TypeError."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_MAINS = ("arc_trl", "arc_trl.eval.compare", "arc_trl.eval.generate", "arc_trl.eval.score", "arc_trl.eval.submission",
          "arc_trl.eval.tables", "arc_trl.cli.main", "arc_experiments.learning", "arc_experiments.learning.heldout_check",
          "arc_experiments.learning.sweep_choice", "arc_experiments.learning.compare_arms",
          "arc_experiments.learning.arms_report", "arc_experiments.learning.arc_agi_report",
          "arc_experiments.learning.opd_records", "arc_experiments.learning.opd_report",
          "arc_experiments.gpu", "arc_experiments.figures", "arc_experiments.coder.first_tokens")
_COVERED_ELSEWHERE = {"arc_experiments.learning.runner",  # = python -m arc_experiments.learning
                      "arc_trl.sandbox.child.zygote"}  # the sandbox's own process, not a command


def _commands() -> list[tuple[str, list[str]]]:
    commands = [(p.relative_to(ROOT).as_posix(), [sys.executable, str(p)])
                for folder in ("scripts", "benchmarks") for p in sorted((ROOT / folder).glob("*.py"))
                if p.name not in ("common.py", "fp8_sync_engine.py")]  # helpers the benchmarks import
    commands += [(f"-m {module}", [sys.executable, "-m", module]) for module in _MAINS]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"].get("scripts", {})
    for name, target in scripts.items():  # run the console entry point's function as the installed script would
        module, func = target.split(":")
        commands.append((name, [sys.executable, "-c", f"import sys; from {module} import {func}; "
                                f"sys.argv[0] = {name!r}; sys.exit({func}())"]))
    from arc_trl.cli.main import SUBCOMMANDS

    for sub in SUBCOMMANDS:  # each `arc-trl SUBCOMMAND --help`
        commands.append((f"arc-trl {sub}", [sys.executable, "-m", "arc_trl.cli.main", sub]))
    return commands


COMMANDS = _commands()


def _help(command: list[str]) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "lab")])}  # lab/: the experiments
    return subprocess.run([*command, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def helps() -> dict[str, subprocess.CompletedProcess]:
    """Every command's --help, run side by side (each is a Python start-up and its imports: ~1 s to ~10 s)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        results = pool.map(_help, [command for _, command in COMMANDS])
        return dict(zip([name for name, _ in COMMANDS], results))


@pytest.mark.parametrize("name", [name for name, _ in COMMANDS])
def test_help_exits_zero_with_a_usage_line(name, helps):
    result = helps[name]
    assert result.returncode == 0, f"{name} --help exited {result.returncode}:\n{result.stderr[-3000:]}"
    assert "usage:" in result.stdout.lower(), f"{name} --help printed no usage line:\n{result.stdout[:2000]}"


def test_every_module_with_a_main_block_is_in_the_list():
    """A new `python -m` command gets its --help run here (arc_trl/cli/*: through `arc-trl SUBCOMMAND`)."""
    found = set()
    for base in (ROOT / "arc_trl", ROOT / "lab" / "arc_experiments"):
        for path in base.rglob("*.py"):
            if '__name__ == "__main__"' in path.read_text() and "cli" not in path.parts:
                module = ".".join(path.relative_to(base.parent).with_suffix("").parts)
                found.add(module.removesuffix(".__main__"))
    assert found - _COVERED_ELSEWHERE == set(_MAINS) - {"arc_trl.cli.main"}
