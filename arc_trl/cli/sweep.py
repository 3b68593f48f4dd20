#!/usr/bin/env python
"""Expand a sweep file into one config per run, show the runs and launch them (docs/sweeps.md).

    arc-trl sweep configs/sweeps/lr-grid.yaml --dry-run                  # write configs, print the table, preflight
    arc-trl sweep configs/sweeps/lr-grid.yaml                            # run one after another
    arc-trl sweep configs/sweeps/lr-grid.yaml --gpus "0,1;2,3"           # 2 at a time, 2 GPUs each
    arc-trl sweep configs/sweeps/lr-grid.yaml --launcher condor          # one HTCondor cluster

Re-running skips finished runs (run_summary.json) and resumes interrupted ones from their latest checkpoint.
"""

import argparse
import shlex
import sys
from pathlib import Path


from arc_trl.launch.condor import CondorError
from arc_trl.launch.launchers import run_sweep
from arc_trl.launch.preflight import preflight
from arc_trl.launch.processes import Terminated
from arc_trl.launch.sweep import SweepError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_file", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="write configs/manifest (and .sub) only")
    parser.add_argument("--launcher", choices=("local", "condor"), default="local")
    parser.add_argument("--max-parallel", type=int, help="local: runs at a time (default: number of GPU sets, or 1)")
    parser.add_argument("--gpus", help="local: GPU sets, one per parallel slot, e.g. '0,1;2,3'")
    parser.add_argument("--sweep-dir", type=Path, help="override the sweep file's sweep_dir")
    parser.add_argument("--command", help="local: command replacing `arc-trl serve`, e.g. "
                        "'arc-trl train' (gets --config <run>/config.yaml [--resume_from_checkpoint ...])")
    parser.add_argument("--no-preflight", action="store_true",
                        help="--dry-run: skip checking each run as `arc-trl train --check_config true` does (model, "
                        "tokenizer, dataset, prompt lengths); a run that fails it makes the exit code 2")
    parser.add_argument("--no-check-keys", action="store_true",
                        help="skip checking config keys against the fields of GRPOConfig/ModelConfig/ArcConfig/"
                        "ArcScriptArguments")
    args = parser.parse_args(argv)

    known_keys = None
    if not args.no_check_keys:
        from arc_trl.launch.launch_config import known_config_keys

        known_keys = known_config_keys()
    try:
        codes = run_sweep(
            args.sweep_file,
            launcher=args.launcher,
            command_prefix=shlex.split(args.command) if args.command else None,
            dry_run=args.dry_run,
            max_parallel=args.max_parallel,
            gpus=args.gpus,
            sweep_dir=args.sweep_dir,
            known_keys=known_keys,
            preflight=None if args.no_preflight else preflight,
        )
    except (SweepError, CondorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Terminated as stopped:
        return 128 + stopped.signum
    if args.dry_run and any(code == 2 for code in codes.values()):
        return 2  # a run would fail its first line
    return 1 if any(code not in (0, None) for code in codes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
