"""Write a synthetic ARC dataset (procedural tasks with reference programs) in the formats of real ARC data.

    arc-trl synthetic --n-tasks 200 --seed 0 --difficulty tiny --out data/synthetic-tiny
    arc-trl synthetic --n-tasks 1000 --families rotate,flip,tile --format kaggle --out data/syn
    arc-trl synthetic --list-families

folder: DIR/<task_id>.json ({"train", "test"}); kaggle: DIR/<name>_challenges.json + DIR/<name>_solutions.json.
Both also write DIR/metadata.jsonl (family, params, reference program, rule, SFT transcripts), read back by
arc_trl.synthetic.load_synthetic(DIR). Families are cycled round-robin; ids are syn-<family>-<seed>-<index>.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path


from arc_trl.synthetic import (
    DIFFICULTIES,
    FAMILIES,
    family_names,
    generate_curriculum,
    save_synthetic,
)
from arc_trl.synthetic.io import FORMATS, METADATA_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-tasks", type=int, help="number of tasks")
    parser.add_argument("--seed", type=int, default=0, help="non-negative seed (default 0)")
    parser.add_argument("--difficulty", default="small", choices=list(DIFFICULTIES), help="grid sizes (default small)")
    parser.add_argument("--families", default=None, help="comma-separated family names (default: all)")
    parser.add_argument("--out", type=Path, help="output folder (must not already hold task files)")
    parser.add_argument("--format", default="folder", choices=FORMATS, help="folder (default) or kaggle")
    parser.add_argument("--name", default="synthetic", help="kaggle file prefix (default: synthetic)")
    parser.add_argument("--no-transcripts", action="store_true", help="leave the SFT transcripts out of the sidecar")
    parser.add_argument("--list-families", action="store_true", help="print the families and their rules, then exit")
    args = parser.parse_args(argv)

    if args.list_families:
        for name in family_names():
            print(f"{name:22s} {FAMILIES[name].rule}")
        return 0
    if args.n_tasks is None or args.out is None:
        parser.error("--n-tasks and --out are required")
    families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
    unknown = [f for f in families or [] if f not in FAMILIES]
    if unknown:
        parser.error(f"unknown families {', '.join(unknown)}; known: {', '.join(family_names())}")
    if args.n_tasks < 0 or args.seed < 0:
        parser.error("--n-tasks and --seed must be non-negative")
    if args.out.exists() and (any(args.out.glob("*.json")) or (args.out / METADATA_FILE).exists()):
        parser.error(f"{args.out} already holds task files; choose a new or empty folder")

    start = time.time()
    tasks = generate_curriculum(args.n_tasks, seed=args.seed, families=families, difficulty=args.difficulty)
    written = save_synthetic(tasks, args.out, fmt=args.format, name=args.name, transcripts=not args.no_transcripts)
    counts = Counter(t.metadata["family"] for t in tasks)
    print(
        f"wrote {len(tasks)} {args.difficulty} tasks ({len(counts)} families) to {args.out} "
        f"as {args.format} ({len(written)} files, {time.time() - start:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
