"""Held-out tasks must never be trained on or chosen with: check that no held-out task appears in another task set.

Synthetic task sets of different seeds have different ids, but small grids of the same rules can coincide, so tasks
are compared by content: the train pairs and the test inputs (`task_key`). The learning experiment's
`check-heldout` stage runs it against the SFT, RL and validation sets:

    python -m arc_experiments.learning.heldout_check --heldout SPEC --against sft-student=SPEC rl=SPEC ... --out FILE
    python -m arc_experiments.learning.heldout_check --configs configs/gpu/smollm2 --out FILE   # an experiment's sets

Writes FILE (JSON: the sets, their sizes and the overlaps, all empty) and exits 0; on any overlap it prints the shared
tasks, writes nothing and exits 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from arc_trl.data.task import ArcTask


def _grid(grid: Any) -> Any:
    return grid.tolist() if hasattr(grid, "tolist") else grid


def task_key(task: ArcTask) -> str:
    """A digest of what the model sees of a task: its train pairs and test inputs (not its id)."""
    content = [[_grid(p.input), _grid(p.output)] for p in task.train] + [_grid(g) for g in task.test_inputs]
    return hashlib.sha256(json.dumps(content).encode()).hexdigest()


def overlaps(heldout: Iterable[ArcTask], others: Mapping[str, Iterable[ArcTask]]) -> dict[str, list[str]]:
    """{set name: ids of the held-out tasks whose content is also in that set}."""
    keys = {task_key(t): t.id for t in heldout}
    out = {}
    for name, tasks in others.items():
        shared = {keys[k] for k in (task_key(t) for t in tasks) if k in keys}
        out[name] = sorted(shared)
    return out


def check(heldout_spec: str, against: Mapping[str, str]) -> dict[str, Any]:
    """Load the task sets and compare them (the report written by the command line)."""
    from arc_trl.tasks import load_tasks

    heldout = load_tasks(heldout_spec)
    others = {name: load_tasks(spec) for name, spec in against.items()}
    return {
        "heldout": heldout_spec, "heldout_tasks": len(heldout),
        "against": {name: {"dataset": against[name], "tasks": len(tasks)} for name, tasks in others.items()},
        "overlap": overlaps(heldout, others),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heldout", help="the held-out task set (a dataset spec)")
    parser.add_argument("--against", nargs="+", default=[], metavar="NAME=SPEC", help="the other task sets")
    parser.add_argument("--configs", help="an experiment's configs folder: its held-out set against its SFT, RL and "
                        "validation sets, as its check-heldout stage (with --heldout / --against: added to them)")
    parser.add_argument("--out", required=True, help="report file, written only when nothing overlaps")
    args = parser.parse_args(argv)
    against = {}
    if args.configs:
        from arc_experiments.learning.profile import heldout_against, heldout_spec, load_profile

        profile = load_profile(Path(args.configs))
        against = heldout_against(Path(args.configs), profile)
        args.heldout = args.heldout or heldout_spec(profile["heldout_tasks"], profile["heldout_seed"],
                                                    Path(args.configs))
    if not args.heldout:
        parser.error("--heldout or --configs is required")
    for item in args.against:
        name, sep, spec = item.partition("=")
        if not sep or not name or not spec:
            parser.error(f"--against {item!r}: expected NAME=SPEC")
        against[name] = spec
    report = check(args.heldout, against)
    bad = {name: ids for name, ids in report["overlap"].items() if ids}
    sizes = ", ".join(f"{name} {v['tasks']}" for name, v in report["against"].items())
    if bad:
        for name, ids in bad.items():
            shown = ", ".join(ids[:10])
            print(f"[heldout-check] {len(ids)} held-out task(s) also in {name} ({against[name]}): {shown}",
                  file=sys.stderr)
        return 1
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"[heldout-check] {report['heldout_tasks']} held-out tasks, none in the other sets ({sizes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
