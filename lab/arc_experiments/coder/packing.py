"""What comes back from a GPU machine through calls that return at most 8 files of <= 16 MiB, 64 MiB together (four
parts of 15 MiB): the work folder's records (no weights) as one tar.gz in parts, and a warm-started LoRA adapter in
parts over as many calls as it needs."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tarfile
import time
from pathlib import Path

from arc_experiments.coder.scoring import say

KEEP = ("metrics.json", "pass_at_k.json", "sampling.json", "per_attempt.jsonl", "completions.jsonl", "metrics.md",
        "choice.json", "score_argv.json", "timeline.jsonl", "speed.json", "transcripts.jsonl", "arc_trl_import.json",
        "trainer_state.json", "run_summary.json", "collapse_guard.jsonl", "arc_trl_config.json")
PART_BYTES = 15 * 1024 * 1024
PARTS_PER_CALL = 4  # 64 MiB a call, all files together (the device's limit; measured: a fifth part was left out)


def split(data: bytes) -> list[bytes]:
    """`data` in parts of PART_BYTES (the last one shorter); `cat` joins them back."""
    return [data[i:i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]


def pack(root: Path, out: Path) -> int:
    """ROOT's records (no weights) in one tar.gz, split into parts of <= 15 MiB (at most PARTS_PER_CALL)."""
    out.mkdir(parents=True, exist_ok=True)
    archive = Path("/tmp/coder-records.tar.gz")
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and (p.name in KEEP or p.suffix == ".log"
                                                                     or p.parent == root / "fp8")]
    files.sort(key=lambda p: p.name == "completions.jsonl")  # the figures' files first: a cut archive keeps them
    with tarfile.open(archive, "w:gz", compresslevel=6) as tar:
        for path in files:
            name = str(path.relative_to(root))
            if path.name != "completions.jsonl":
                tar.add(path, arcname=name)
                continue
            lines = []  # `messages` (the prompt again, and the turns) only where a SUBMIT ended the episode (the
            for line in path.read_text().splitlines():  # solved ones among them: transcripts replay their turns)
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if record.get("finish_reason") != "submitted":
                        record.pop("messages", None)
                    lines.append(json.dumps(record))
            data = ("\n".join(lines) + "\n").encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), int(time.time())
            tar.addfile(info, io.BytesIO(data))
    data = archive.read_bytes()
    parts = split(data)
    for i, part in enumerate(parts[:PARTS_PER_CALL]):
        (out / f"records.tar.gz.part{i:02d}").write_bytes(part)
    over = len(parts) > PARTS_PER_CALL
    say(f"packed {len(data):,} bytes in {len(parts)} part(s)" + (f" (over {PARTS_PER_CALL}: the rest left out)" * over))
    return 3 if over else 0


def pack_model(root: Path, model: str, out: Path, call: int, scratch: Path = Path("/tmp")) -> int:
    """The warm-started model's LoRA adapter folder (warm/MODEL/model) as one tar, split into parts of <= 15 MiB;
    call K writes parts 4K..4K+3 into OUT (the 1.5B's r-32 adapter: 159 MB, 11 parts, three calls). Here the parts
    are joined (`cat`) and carried to the next machine (`coder.sh`: ferry source carry/), so its warm stages start
    from it."""
    folder = root / "warm" / model / "model"
    if not (folder / "adapter_config.json").exists():
        say(f"pack-model: {folder} holds no LoRA adapter (a full model does not come back: train it again)")
        return 2
    archive = scratch / f"warm-{model}-model.tar"
    if not archive.exists():  # written once, whole, then renamed: every call splits the same bytes
        partial = archive.with_suffix(f".tar.{os.getpid()}")
        with tarfile.open(partial, "w") as tar:
            tar.add(folder, arcname=str(folder.relative_to(root)))
        partial.replace(archive)
    data = archive.read_bytes()
    parts = split(data)
    out.mkdir(parents=True, exist_ok=True)
    first = call * PARTS_PER_CALL
    for i in range(first, min(first + PARTS_PER_CALL, len(parts))):
        (out / f"{archive.name}.part{i:02d}").write_bytes(parts[i])
    calls = -(-len(parts) // PARTS_PER_CALL)
    say(f"pack-model: {archive.name} {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()}; parts "
        f"{first}..{min(first + PARTS_PER_CALL, len(parts)) - 1} of {len(parts)} in {out} (call {call} of "
        f"0..{calls - 1})")
    return 0 if first < len(parts) else 3
