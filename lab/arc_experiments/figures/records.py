"""Committed result records: `NAME.json`, or `NAME.json.gz` for a large one. A learning arm's record
(`server_learning_*.json`, from the multigpu and FP8 stages) embeds its in-training evaluations' attempts (~5 MB
each, ~0.1 MB with `gzip -9n`), and every GPU call carries the checkout beside a 42 MB bundle part under a 64 MiB
limit, so those are committed compressed. The figures read the learning records through `record_paths` /
`load_record`; the other records (layouts ~0.1 MB, rollouts, machine.json) are read plain."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

COMPRESSED = ".json.gz"


def record_paths(folder: Path, pattern: str) -> dict[str, Path]:
    """{name: path} of folder's records matching `pattern` (a glob without the suffix, e.g. "server_learning_*"),
    plain or gzipped, by name (the file name without `.json` / `.json.gz`), in name order. A name committed in both
    forms is an error: which one the figures used would be a guess."""
    found: dict[str, Path] = {}
    for path in [*folder.glob(f"{pattern}.json"), *folder.glob(f"{pattern}{COMPRESSED}")]:
        name = path.name.removesuffix(COMPRESSED).removesuffix(".json")
        if name in found:
            raise ValueError(f"{folder}: {name} is committed as both {found[name].name} and {path.name}; keep one")
        found[name] = path
    return dict(sorted(found.items()))


def load_record(path: Path) -> Any:
    """A record's JSON, from `.json` or `.json.gz`."""
    if path.name.endswith(COMPRESSED):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    return json.loads(path.read_text())
