"""A cheap identity for a model folder: which build of a checkpoint a run started from or an evaluation scored.

Two builds of the same config on two machines (or twice on one) are different models even when their numbers agree, so
the identity is the machine, the folder and its weights file's size and modification time, hashed: reading gigabytes of
weights to hash them is not needed to tell builds apart, and a copied folder keeps its recorded identity in the files
that carry it (`arc_trl_config.json` of a run, a results file).
"""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def model_fingerprint(path: str | Path) -> str | None:
    """`host:folder:file:size:mtime_ns` of the folder's weights file, hashed (16 hex digits); None when `path` is not a
    local folder with weights (a hub id, say)."""
    folder = Path(path).expanduser()
    weights = next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)
    if weights is None:
        return None
    stat = weights.stat()
    key = f"{socket.gethostname()}:{folder.resolve()}:{weights.name}:{stat.st_size}:{stat.st_mtime_ns}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]
