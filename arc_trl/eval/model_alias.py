"""A stable path for a local model folder, so that vLLM's compile cache serves every evaluation of one architecture.

vLLM keys its torch.compile cache by, among other factors, the model path, so each evaluation of a new checkpoint
folder compiles again (about 34 s per evaluation on an H100 for the 0.6B policy; 29 -> 18 s per engine start for the
tests' tiny model on the 2-core VM: docs/benchmarks.md), although the compiled graph takes the weights as inputs.
`stable_model_path(folder, stack)` hands the engine `<root>/<config hash>-<slot>`, a symbolic link to the folder,
held (an exclusive `flock`) until `stack` closes: evaluations of one architecture, one after the other, get the same
path; evaluations side by side get different slots. A hub id, a folder without config.json, or any filesystem error
leaves the path as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

SLOTS = 8


def alias_root() -> Path:
    """`$ARC_TRL_MODEL_ALIAS_DIR`, else a per-user folder in the temporary directory."""
    given = os.environ.get("ARC_TRL_MODEL_ALIAS_DIR")
    return Path(given) if given else Path(tempfile.gettempdir()) / f"arc-trl-model-alias-{os.getuid()}"


def stable_model_path(model: str, stack: contextlib.ExitStack, root: Path | None = None) -> str:
    """The path to give vLLM for `model` (see the module docstring); the slot is released when `stack` closes."""
    folder = Path(model)
    config = folder / "config.json"
    if not config.is_file():
        return model
    try:
        key = hashlib.sha256(config.read_bytes()).hexdigest()[:12]
        root = root or alias_root()
        root.mkdir(parents=True, exist_ok=True)
        for slot in range(SLOTS):
            alias = root / f"{key}-{slot}"
            lock = open(root / f"{key}-{slot}.lock", "a")  # noqa: SIM115  held until the stack closes
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            stack.callback(lock.close)  # closing the file releases the lock
            temporary = root / f".{key}-{slot}.{os.getpid()}"
            temporary.unlink(missing_ok=True)
            temporary.symlink_to(folder.resolve(), target_is_directory=True)
            os.replace(temporary, alias)  # atomic: a reader sees the old target or the new one
            return str(alias)
        logger.info("all %d model-alias slots of %s are in use; vLLM gets the folder itself", SLOTS, root)
    except OSError as e:
        logger.info("no stable model path for %s (%s); vLLM gets the folder itself", model, e)
    return model
