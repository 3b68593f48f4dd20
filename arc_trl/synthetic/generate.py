"""Generate synthetic ARC tasks from the transformation families.

A task is accepted only when it is informative: every pair changes the grid, inputs are distinct, every grid is valid
and within the difficulty's bounds, the family's own checks pass (e.g. every recoloured colour is shown), and no
rival explanation (any family's `rival_params`, e.g. another rotation or a flip) fits all train pairs while giving
different test outputs. Finally the task's reference program is executed on every pair and must reproduce it.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np

import arc_trl.synthetic.families  # noqa: F401  (registers the families)
from arc_trl.data.task import ArcTask, Pair
from arc_trl.synthetic.difficulty import Difficulty, get_difficulty
from arc_trl.synthetic.family import FAMILIES, Family, Params, family_names, get_family

MAX_TASK_ATTEMPTS = 200
MAX_PAIR_ATTEMPTS = 25

GridPair = tuple[np.ndarray, np.ndarray]


def generate_task(
    family: str | Family,
    seed: int | Sequence[int] | np.random.Generator,
    difficulty: str | Difficulty = "small",
    task_id: str | None = None,
) -> ArcTask:
    """One random task of `family`. `seed` (an int >= 0, a sequence of them, or a Generator) makes it reproducible.

    The default id is `syn-<family>-<seed>` for an int seed, else `syn-<family>-<hash of the grids>`.
    metadata: family, params, reference_program, difficulty, rule (one sentence).
    """
    fam = get_family(family)
    level = get_difficulty(difficulty)
    if not isinstance(seed, np.random.Generator):  # the family name is mixed in: seed 1 of two families differ
        seed_words = [seed] if isinstance(seed, int) else list(seed)
        if not all(isinstance(w, int) and not isinstance(w, bool) and w >= 0 for w in seed_words):
            raise ValueError(f"seed must be a non-negative int, a sequence of them or a Generator, got {seed!r}")
        rng = np.random.default_rng([*seed_words, zlib.crc32(fam.name.encode())])
    else:
        rng = seed
    for _ in range(MAX_TASK_ATTEMPTS):
        params = fam.sample_params(rng, level)
        n_train = int(rng.integers(level.min_train, level.max_train + 1))
        n_test = int(rng.integers(level.min_test, level.max_test + 1))
        pairs = _sample_pairs(fam, params, rng, level, n_train + n_test)
        if pairs is None:
            continue
        train, test = pairs[:n_train], pairs[n_train:]
        if not fam.informative([x for x, _ in train], [x for x, _ in test], params):
            continue
        if _ambiguous(fam, params, train, test):
            continue
        return _build_task(fam, params, level, train, test, task_id, seed)
    raise RuntimeError(
        f"could not generate an informative {fam.name!r} task at difficulty {level.name!r} "
        f"in {MAX_TASK_ATTEMPTS} attempts"
    )


def generate_curriculum(
    n_tasks: int,
    seed: int = 0,
    families: Sequence[str] | None = None,
    difficulty: str | Difficulty = "small",
) -> list[ArcTask]:
    """`n_tasks` tasks cycling through `families` (default: all, in registration order).

    Task `index` is generated from the seed sequence [seed, index] (plus the family name) and gets the id
    `syn-<family>-<seed>-<index>`, so a task does not depend on `n_tasks` and ids are stable under the seed.
    """
    if isinstance(n_tasks, bool) or not isinstance(n_tasks, int) or n_tasks < 0:
        raise ValueError(f"n_tasks must be a non-negative integer, got {n_tasks!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    names = list(families) if families is not None else family_names()
    if not names:
        raise ValueError("families is empty; known families: " + ", ".join(family_names()))
    for name in names:
        get_family(name)  # fails with the list of known families
    level = get_difficulty(difficulty)
    tasks = []
    for index in range(n_tasks):
        name = names[index % len(names)]
        tasks.append(generate_task(name, [seed, index], level, task_id=f"syn-{name}-{seed}-{index}"))
    return tasks


def reference_transform(source: str) -> Callable[[np.ndarray], Any]:
    """Execute a (trusted, generator-written) reference program and return its `transform` function."""
    namespace: dict[str, Any] = {"__name__": "reference_program"}
    exec(compile(source, "<reference_program>", "exec"), namespace)  # noqa: S102 - our own generated source
    return namespace["transform"]


# --- internals -------------------------------------------------------------------------------------------------------


def _sample_pairs(
    fam: Family, params: Params, rng: np.random.Generator, level: Difficulty, count: int
) -> list[GridPair] | None:
    pairs: list[GridPair] = []
    for _ in range(count):
        for _ in range(MAX_PAIR_ATTEMPTS):
            pair = _sample_pair(fam, params, rng, level)
            if pair is not None and not any(_same(pair[0], x) for x, _ in pairs):
                pairs.append(pair)
                break
        else:
            return None
    return pairs


def _sample_pair(fam: Family, params: Params, rng: np.random.Generator, level: Difficulty) -> GridPair | None:
    try:  # families raise ValueError for samples they cannot use (e.g. no unique largest object)
        grid = np.asarray(fam.sample_input(rng, params, level), dtype=int)
        out = np.asarray(fam.apply(grid, params), dtype=int)
    except ValueError:
        return None
    if not _fits(grid, level.max_side) or not _fits(out, level.max_output_side) or _same(grid, out):
        return None
    if len(np.unique(grid)) < 2:  # a one-colour input shows almost nothing about the rule
        return None
    return grid, out


def _fits(grid: np.ndarray, max_side: int) -> bool:
    return (
        grid.ndim == 2 and 1 <= min(grid.shape) and max(grid.shape) <= max_side and 0 <= grid.min() <= grid.max() <= 9
    )


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool((a == b).all())


@cache
def _rivals() -> list[tuple[Family, Params]]:
    return [(fam, params) for fam in FAMILIES.values() for params in fam.rival_params()]


def _rival_output(fam: Family, params: Params, grid: np.ndarray) -> np.ndarray | None:
    try:  # rivals see inputs they were not made for and may fail in any way
        return np.asarray(fam.apply(grid, params))
    except Exception:  # noqa: BLE001
        return None


def _ambiguous(fam: Family, params: Params, train: list[GridPair], test: list[GridPair]) -> bool:
    """True when some rival explains every train pair but predicts a different output for some test input."""
    for rival, rival_params in _rivals():
        if rival is fam and rival_params == params:
            continue
        if not all(_same_or_false(_rival_output(rival, rival_params, x), y) for x, y in train):
            continue
        predictions = [_rival_output(rival, rival_params, x) for x, _ in test]
        if any(p is None for p in predictions):
            continue  # not a working alternative
        if not all(_same(p, y) for p, (_, y) in zip(predictions, test)):
            return True
    return False


def _same_or_false(pred: np.ndarray | None, target: np.ndarray) -> bool:
    return pred is not None and _same(pred, target)


def _build_task(
    fam: Family,
    params: Params,
    level: Difficulty,
    train: list[GridPair],
    test: list[GridPair],
    task_id: str | None,
    seed: Any,
) -> ArcTask:
    source = fam.program(params)
    transform = reference_transform(source)
    for i, (grid, out) in enumerate(train + test):
        got = np.asarray(transform(grid.copy()))
        if not _same(got, out):  # a bug in the family, never a user error
            raise RuntimeError(f"family {fam.name!r} params {params}: reference program disagrees on pair {i}")
    params = json.loads(json.dumps(params))  # plain JSON values, as they will be after a save and load
    if task_id is None:
        if isinstance(seed, int) and not isinstance(seed, bool):
            task_id = f"syn-{fam.name}-{seed}"
        else:
            digest = hashlib.sha1(json.dumps([[x.tolist(), y.tolist()] for x, y in train + test]).encode())
            task_id = f"syn-{fam.name}-{digest.hexdigest()[:10]}"
    metadata = {
        "family": fam.name,
        "params": params,
        "reference_program": source,
        "difficulty": level.name,
        "rule": fam.describe(params),
    }
    return ArcTask(
        id=task_id,
        train=[Pair(x.tolist(), y.tolist()) for x, y in train],
        test_inputs=[x.tolist() for x, _ in test],
        test_outputs=[y.tolist() for _, y in test],
        source=None,
        metadata=metadata,
    )
