"""lab/gpu_box/ferry.py: files cut into chunks that each fit one call, put back together on the far side, each
file as soon as its chunks are there, checked by sha256."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FERRY = ROOT / "lab" / "gpu_box" / "ferry.py"


def ferry(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(FERRY), *args], capture_output=True, text=True)


def test_files_come_back_whole_in_order_as_their_chunks_arrive(tmp_path):
    src = tmp_path / "src"
    (src / "bundle").mkdir(parents=True)
    files = {"bundle/part.00": os.urandom(1000), "bundle/part.01": os.urandom(2500), "a.whl": os.urandom(10)}
    for name, data in files.items():
        (src / name).write_bytes(data)
    done = ferry("pack", str(tmp_path / "gpu"), str(src / "bundle"), str(src / "a.whl"), "--chunk-bytes", "700")
    assert done.returncode == 0 and "3 files, 3,510 bytes -> 6 chunks" in done.stdout
    assert sorted(p.name for p in (tmp_path / "gpu").iterdir()) == [f"{i:03d}" for i in range(6)]
    assert all((tmp_path / "gpu" / f"{i:03d}" / f"chunk.{i:03d}").stat().st_size == 700 for i in range(5))
    store, out = tmp_path / "store", tmp_path / "out"
    for i in (0, 1):
        assert ferry("stash", str(tmp_path / "gpu" / f"{i:03d}"), "--store", str(store)).returncode == 0
    partial = ferry("assemble", str(out), "--store", str(store))
    assert partial.returncode == 3 and "1 of 3 files complete" in partial.stdout
    assert "waiting: bundle/part.01 (chunks 2, 3, 4)" in partial.stdout
    assert (out / "bundle" / "part.00").read_bytes() == files["bundle/part.00"]
    for i in range(2, 6):
        ferry("stash", str(tmp_path / "gpu" / f"{i:03d}"), "--store", str(store))
    assert ferry("assemble", str(out), "--store", str(store)).returncode == 0
    assert {name: (out / name).read_bytes() for name in files} == files


def test_a_corrupt_chunk_is_refused_and_the_default_size_leaves_room_for_the_tree(tmp_path):
    (tmp_path / "f.bin").write_bytes(os.urandom(300))
    ferry("pack", str(tmp_path / "gpu"), str(tmp_path / "f.bin"), "--chunk-bytes", "200")
    store = tmp_path / "store"
    for i in (0, 1):
        ferry("stash", str(tmp_path / "gpu" / f"{i:03d}"), "--store", str(store))
    chunk = store / "chunk.000"
    chunk.write_bytes(b"x" * 200)  # the same size, other bytes
    refused = ferry("assemble", str(tmp_path / "out"), "--store", str(store))
    assert refused.returncode == 3 and "corrupt or short chunks (carry them again): 0" in refused.stdout
    assert "waiting: f.bin (chunks 0)" in refused.stdout and not (tmp_path / "out" / "f.bin").exists()
    ferry("stash", str(tmp_path / "gpu" / "000"), "--store", str(store))  # carried again: whole
    assert ferry("assemble", str(tmp_path / "out"), "--store", str(store)).returncode == 0
    assert (tmp_path / "out" / "f.bin").read_bytes() == (tmp_path / "f.bin").read_bytes()
    sized = subprocess.run([sys.executable, str(FERRY), "pack", str(tmp_path / "g2"), str(tmp_path / "f.bin")],
                           capture_output=True, text=True, cwd=ROOT)
    manifest = json.loads((tmp_path / "g2" / "000" / "manifest.json").read_text())
    tree = int(subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(FERRY.parent)!r}); "
                               "import ferry, pathlib; print(ferry.tree_bytes(pathlib.Path('.')))"],
                              capture_output=True, text=True, cwd=ROOT).stdout)
    assert sized.returncode == 0 and manifest["chunk_bytes"] == 64 * 1024 * 1024 - tree - 1024 * 1024
