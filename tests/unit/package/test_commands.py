"""Every command has one home, `arc_trl/cli` behind `arc-trl SUBCOMMAND` (`python -m arc_trl SUBCOMMAND`), and one
spelling in the docs.

- `arc-trl --help` lists every subcommand, and each subcommand's module exists (each one's own `--help` runs in
  tests/integration/test_entry_points.py);
- a `scripts/*.py` shim runs the subcommand of its name (the same function), and exists only where a path is needed;
- README.md, docs/*.md, results/README.md and the lab's pages (lab/README.md, lab/docs/*.md) never teach `python scripts/X.py`: every `arc-trl X` and
  `python -m arc_trl X` they show is a subcommand, every `python -m arc_experiments...` a module of the checkout's lab/, and
  every `scripts/...` file they name exists.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from arc_trl.cli.main import SUBCOMMANDS, main

ROOT = Path(__file__).resolve().parents[3]
# shim -> why a path is needed (a new shim needs a reason here; anything else runs `python -m arc_trl X`)
SHIMS = {
    "train": "accelerate launch takes a script path (and arc-trl serve / HTCondor jobs launch it)",
}
DOCS = sorted([ROOT / "README.md", ROOT / "results" / "README.md", *(ROOT / "docs").glob("*.md"),
               ROOT / "lab" / "README.md", *(ROOT / "lab" / "docs").glob("*.md")])  # the lab's pages too


def test_arc_trl_help_lists_every_subcommand_and_each_module_exists(capsys):
    assert main(["--help"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    assert listed == list(SUBCOMMANDS)
    for name, (target, _) in SUBCOMMANDS.items():
        module = target.split(":")[0]
        assert importlib.util.find_spec(module) is not None, f"arc-trl {name}: no module {module}"
        assert module.startswith("arc_trl."), f"arc-trl {name} runs {module}: outside the library"


def test_unknown_subcommand_exits_2_naming_it(capsys):
    assert main(["trian"]) == 2
    assert "unknown subcommand 'trian'" in capsys.readouterr().err


def _shim_target(path: Path) -> str:
    """`module:function` that a shim imports from arc_trl (its one `from arc_trl... import f`)."""
    imports = [node for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("arc_trl")]
    assert len(imports) == 1 and len(imports[0].names) == 1, f"{path.name}: expected one import from arc_trl"
    return f"{imports[0].module}:{imports[0].names[0].name}"


@pytest.mark.parametrize("path", sorted((ROOT / "scripts").glob("*.py")), ids=lambda p: p.name)
def test_each_shim_is_the_subcommand_of_its_name(path):
    name = path.stem
    assert name in SHIMS, f"scripts/{path.name}: a shim without a reason (a path is needed?); use arc-trl instead"
    subcommand = name.replace("_", "-")
    assert subcommand in SUBCOMMANDS, f"scripts/{path.name}: no `arc-trl {subcommand}`"
    assert _shim_target(path) == SUBCOMMANDS[subcommand][0]


def test_every_listed_shim_exists():
    assert sorted(SHIMS) == sorted(p.stem for p in (ROOT / "scripts").glob("*.py"))


def _code(text: str) -> list[str]:
    """The code of a markdown page: fenced blocks and inline spans (which may wrap over lines)."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    return fenced + re.findall(r"`([^`]+)`", prose)


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_docs_spell_every_command_as_it_is_today(page):
    text = page.read_text()
    assert "python scripts/" not in text, f"{page.name}: `python scripts/X.py` is spelled `arc-trl X` now"
    problems = []
    for code in _code(text):
        for sub in re.findall(r"(?:^|[\s(\"'=])(?:arc-trl|python -m arc_trl)\s+([a-z][\w-]*)", code):
            if sub not in SUBCOMMANDS:
                problems.append(f"`arc-trl {sub}`: no such subcommand")
        for module in re.findall(r"-m (arc_experiments[\w.]*)", code):
            base = ROOT.joinpath("lab", *module.split("."))  # the lab's package (lab/README.md)
            if not (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()):
                problems.append(f"`python -m {module}`: no such module in the checkout")
    for path in re.findall(r"(?<![\w$/.-])(scripts/[\w./-]+\.(?:py|sh))", text):
        if not (ROOT / path).is_file():
            problems.append(f"{path}: no such file")
    assert not problems, f"{page.relative_to(ROOT)}:\n  " + "\n  ".join(sorted(set(problems)))
