"""The shape of the `arc_trl` package: no module over 500 lines, no import cycle among its modules (nor among
`arc_experiments`'), deferred imports included; no lower room importing above it; a few loose modules at the root;
scripts, benchmarks and experiments under their line ceilings. `python tests/unit/package/test_structure.py` prints
issue 62's figures (root modules, cycles, upward imports).

Import graph: read with `ast` (nothing is imported), one edge per import executed when a module is loaded: module
level, including inside top-level `if` / `try` / `with` and class bodies, and under `if TYPE_CHECKING:` (a type-only
import still ties the two modules together: issue 23 counts such pairs as cycles); not inside functions. `import a.b` and `from a.b import c` point at `a.b`, or at `a.b.c` when that is a module;
parent packages are not added (their `__init__` runs first, but a package re-exporting its modules is not a cycle).
The modules of `arc_trl/sandbox/child/` import each other by their bare names (the zygote runs them as scripts), and
are resolved as such. A cycle is a strongly connected component of more than one module.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "arc_trl"
EXPERIMENTS = PACKAGE.parent / "lab" / "arc_experiments"  # the lab's, built on arc_trl: its own modules must not form cycles either
MAX_LINES = 500
BARE_NAME_PACKAGES = ("arc_trl.sandbox.child",)  # their modules import each other as top-level names


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _load_time_imports(nodes: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements run when the module is loaded (see the module docstring)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending = list(nodes)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        else:
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            for handler in getattr(node, "handlers", []):  # try / except bodies
                pending.extend(handler.body)
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package's modules an import statement of `module` loads (named, not their parents)."""
    package = module if is_package else module.rpartition(".")[0]
    bare = package in BARE_NAME_PACKAGES

    def resolve(name: str) -> str | None:
        if bare and f"{package}.{name}" in modules:
            return f"{package}.{name}"
        while name and name not in modules:  # `import a.b.c` of a non-module c: the closest module
            name = name.rpartition(".")[0]
        return name or None

    if isinstance(node, ast.Import):
        found = {resolve(alias.name) for alias in node.names}
    else:
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join(base + ([node.module] if node.module else []))
        else:
            origin = node.module or ""
        found = set()
        for alias in node.names:
            submodule = f"{origin}.{alias.name}"
            found.add(submodule if submodule in modules else resolve(origin))
    return {target for target in found if target is not None and target != module}


def import_graph(package: Path = PACKAGE, deferred: bool = False) -> tuple[dict[str, set[str]],
                                                                            dict[tuple[str, str], int]]:
    """(module -> the package's modules it imports when loaded, (module, target) -> line of the first such import);
    with `deferred`, the imports inside functions too (a deferred import hides a cycle from Python, not from the
    reader: the two modules still need each other)."""
    modules = module_files(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    lines: dict[tuple[str, str], int] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        found = ([n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))] if deferred
                 else _load_time_imports(tree.body))
        for node in found:
            for target in _targets(name, path.name == "__init__.py", node, modules):
                graph[name].add(target)
                lines[(name, target)] = min(lines.get((name, target), node.lineno), node.lineno)
    return graph, lines


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, pending = set(), [start]
    while pending:
        for target in graph[pending.pop()]:
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted; sorted by their first module."""
    reach = {name: _reachable(graph, name) for name in graph}
    components, placed = [], set()
    for name in sorted(graph):
        if name in placed or name not in reach[name]:
            continue
        component = sorted(other for other in reach[name] if name in reach[other])
        placed.update(component)
        if len(component) > 1:
            components.append(component)
    return components


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest import cycle through the first module of `component`: [a, b, ..., a]."""
    start, members = component[0], set(component)
    previous: dict[str, str] = {}
    pending = deque([start])
    while pending:
        name = pending.popleft()
        for target in sorted(graph[name] & members):
            if target == start:
                path = [name]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if target not in previous:
                previous[target] = name
                pending.append(target)
    raise AssertionError(f"no cycle through {start}")


def describe(graph: dict[str, set[str]], lines: dict[tuple[str, str], int], component: list[str]) -> str:
    cycle = shortest_cycle(graph, component)
    steps = [f"{a} -> {b} (line {lines[(a, b)]})" for a, b in zip(cycle, cycle[1:])]
    return f"{len(component)} modules: {', '.join(component)}\n    e.g. " + "\n         ".join(steps)


def test_no_module_is_over_500_lines():
    counts = {name: len(path.read_text().splitlines()) for name, path in module_files().items()}
    over = sorted(((n, name) for name, n in counts.items() if n > MAX_LINES), reverse=True)
    assert not over, f"modules over {MAX_LINES} lines (split them along a real seam):\n" + "\n".join(
        f"  {n:5d}  {module_files()[name].relative_to(PACKAGE.parent)}" for n, name in over)


@pytest.mark.parametrize("deferred", [False, True], ids=["at-load", "deferred-too"])
@pytest.mark.parametrize("package", [PACKAGE, EXPERIMENTS], ids=lambda p: p.name)
def test_no_import_cycle_among_the_package_modules(package, deferred):
    """Neither at load time nor through imports deferred into functions (rollout/generators <-> streams and the GPU
    stages' circle once hid that way)."""
    graph, lines = import_graph(package, deferred=deferred)
    assert any(graph.values()), "no import found at all: the reader is broken"
    found = cycles(graph)
    assert not found, "import cycles (strongly connected components):\n" + "\n".join(
        f"  {describe(graph, lines, component)}" for component in found)



# The rooms: the low ones (config, integrations, models, OPD, rewards, sandbox, data) are built on by the packages
# above the seams, never the reverse.
ABOVE_THE_SEAMS = ("arc_trl.trainer", "arc_trl.rollout", "arc_trl.opd", "arc_trl.eval", "arc_trl.collapse",
                   "arc_trl.launch", "arc_trl.cli", "arc_trl.train_entry", "arc_trl.warmstart", "arc_trl.view", "arc_trl.ttrl")
LOWER_LAYERS = {  # package -> (what it must never import, the modules of those it may: each with its reason)
    "arc_trl.data": (ABOVE_THE_SEAMS + ("arc_trl.synthetic", "arc_trl.tasks"), ()),
    "arc_trl.integrations": (ABOVE_THE_SEAMS, ()),
    "arc_trl.models": (ABOVE_THE_SEAMS, ()),
    "arc_trl.rewards": (ABOVE_THE_SEAMS, ()),
    "arc_trl.sandbox": (ABOVE_THE_SEAMS, ()),
    "arc_trl.opd": (ABOVE_THE_SEAMS, ()),  # (its own modules excepted, as for every package here)
    "arc_trl.config": (ABOVE_THE_SEAMS, (
        "arc_trl.opd.backends",  # the registry of teacher backends: names, needs, help; its builders import lazily
        "arc_trl.collapse.settings",  # deferred: the collapse_* keys checked by the detector's own rules
    )),
}
MAX_ROOT_MODULES = 5  # chat_template, run_summary, sft_data, tasks, train_entry (and __init__, __main__)


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def upward_imports() -> list[str]:
    """`module line N: target` for each import of a lower layer's module (deferred ones included) that reaches above
    it."""
    graph, lines = import_graph(deferred=True)
    bad = []
    for name in sorted(graph):
        for lower, (above, allowed) in LOWER_LAYERS.items():
            if not _inside(name, lower):
                continue
            bad += [f"{name} line {lines[(name, target)]}: {target}" for target in sorted(graph[name])
                    if any(_inside(target, p) for p in above if not _inside(p, lower)) and target not in allowed]
    return bad


def root_modules() -> list[str]:
    """The package root's loose modules (its `__init__` and `__main__` aside)."""
    return sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem not in ("__init__", "__main__"))


def structure_figures() -> dict[str, int]:
    """Issue 62's figures: root modules, import cycles (deferred imports included; of `arc_trl` and of
    `arc_experiments`), upward imports."""
    return {"root modules": len(root_modules()),
            "cycles": sum(len(cycles(import_graph(p, deferred=True)[0])) for p in (PACKAGE, EXPERIMENTS)),
            "upward imports": len(upward_imports())}


def test_lower_layers_import_nothing_above_them_even_inside_functions():
    """`synthetic` builds on `data`; `data` importing `synthetic` (even lazily, inside a function) ties the layers
    together both ways. `arc_trl.tasks` sits above both and takes every task spec. The config, the integrations with
    TRL/vLLM/PEFT, the models, the rewards, the sandbox and the OPD room are built on by the trainer, the rollout and
    the CLI, never the reverse (`trl_internals` once imported the trainer's LoRA merge, the local teacher the trainer's
    RoPE fix, the config the rollout's settings for the names of the schedulings)."""
    bad = upward_imports()
    assert not bad, "upward imports:\n  " + "\n  ".join(bad)


def test_the_package_root_keeps_a_few_modules():
    """Each concern has its room (config/, integrations/, models/, opd/, ...); the root keeps what has none."""
    assert len(root_modules()) <= MAX_ROOT_MODULES, f"loose modules at arc_trl/: {root_modules()}"


def test_the_structure_figures():
    figures = structure_figures()
    print(figures)  # pytest -s, or `python tests/unit/package/test_structure.py`
    assert figures == {"root modules": MAX_ROOT_MODULES, "cycles": 0, "upward imports": 0}, figures


CEILINGS = {"scripts": MAX_LINES, "benchmarks": MAX_LINES, "lab/arc_experiments": 400}  # folder -> most lines per file


def test_no_script_benchmark_or_experiment_file_is_over_its_ceiling():
    root = PACKAGE.parent
    over = [f"  {n:5d}  {path.relative_to(root)} (ceiling {limit})"
            for folder, limit in CEILINGS.items() for path in sorted((root / folder).rglob("*"))
            if path.suffix in (".py", ".sh") and (n := len(path.read_text().splitlines())) > limit]
    assert not over, "files over their ceiling (split them along a real seam):\n" + "\n".join(over)


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their base name (no packages under tests/): two files of one name make the whole
    suite stop at collection ("import file mismatch"), as tests/unit/trainer/ and tests/integration/
    test_peer_teacher.py once did. The lab's tests (lab/tests) run in the same invocation (`make test`)."""
    from collections import Counter

    tests = Path(__file__).resolve().parents[2]
    names = Counter(path.name for root in (tests, tests.parent / "lab" / "tests") for path in root.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


if __name__ == "__main__":
    print(structure_figures())
