"""One entry point for every task spec a user can give: bundled datasets, Kaggle files, folders, single task files
(`arc_trl.data.loaders`) and generated curricula `synthetic:n=64,seed=0,difficulty=tiny` (`arc_trl.synthetic.spec`).

It sits above both packages, so `data` (the task model and its loaders) never imports `synthetic` (which builds on
`data`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from arc_trl.data.loaders import load_task_files
from arc_trl.data.loaders import select_tasks
from arc_trl.data.task import ArcTask
from arc_trl.synthetic.spec import is_synthetic_spec, load_synthetic_spec


def load_tasks(
    spec: str | Path, *, solutions: str | Path | None = None, ids: Iterable[str] | None = None
) -> list[ArcTask]:
    """Load and validate every task of `spec`, sorted by id: the one public loader (`arc_trl.load_tasks`;
    `arc_trl.data.loaders` lists the file sources). `solutions`: a Kaggle solutions file for a challenges file. `ids`:
    keep only these (each must exist)."""
    if not is_synthetic_spec(spec):
        return load_task_files(spec, solutions=solutions, ids=ids)
    if solutions is not None:
        raise ValueError(f"{spec!r}: a synthetic curriculum carries its own solutions; do not pass solutions=")
    tasks = sorted(load_synthetic_spec(spec), key=lambda t: t.id)
    return select_tasks(tasks, ids, spec) if ids is not None else tasks


def load_task(spec: str | Path, task_id: str, *, solutions: str | Path | None = None) -> ArcTask:
    """Load one task by id from any spec accepted by `load_tasks`."""
    return load_tasks(spec, solutions=solutions, ids=[task_id])[0]
