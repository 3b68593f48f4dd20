"""`python -m arc_experiments.gpu STAGE [STAGE ...] --out DIR`: the GPU runs behind docs/benchmarks.md, docs/learning.md
and docs/collapse.md, one stage after the other on one GPU machine, then a table of exit codes and times and the
results packed into OUT (`--list`: the stages; `--dry-run`: the commands, nothing run)."""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

from arc_experiments.gpu.runner import Context, gpu_memory_samples, header
from arc_experiments.gpu.collect import collect
from arc_experiments.gpu.stages import STAGES, describe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m arc_experiments.gpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("stages", nargs="*", metavar="STAGE")
    parser.add_argument("--out", type=Path, help="where results, profiles and a tarball of logs go")
    parser.add_argument(
        "--work", type=Path, default=Path("/tmp/arc-gpu"), help="models, runs and logs (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, help="the training seed of control (default 0) and seedpair (default 1); "
                        "fp8-learning*: only this seed (default 0-2)")
    parser.add_argument("--seeds", type=lambda text: tuple(int(s) for s in text.split(",")),
                        help="fp8-learning*, opd-heldout: only these seeds, comma-separated (e.g. 0,1)")
    parser.add_argument("--only", help="pieces / teachers / seedpair: the experiment's stages (shell patterns); "
                        "multigpu: its phases (A,B,...); opd-validation: teacher and arms (e.g. teacher,opd-rl-*); "
                        "opd-heldout: arms (e.g. grpo-only,opd-peer)")
    parser.add_argument("--steps", type=int, help="optimizer steps of the measuring runs (each stage has a default)")
    parser.add_argument(
        "--limit", type=int, default=570, help="seconds for a stage's main command (default %(default)s)"
    )
    parser.add_argument(
        "--phase-limit", type=int, default=900, help="multigpu: seconds each phase may run (default %(default)s)"
    )
    parser.add_argument("--variants", help="profile: comma-separated variants, e.g. base,mb32,mb32_sw16_tb32_pe")
    parser.add_argument("--slots", type=int, default=2, help="opd-*: training runs at once on a GPU (default "
                        "%(default)s; an H200 holds 6 with configs/gpu/smollm2's fixed 6 GiB KV cache)")
    parser.add_argument("--configs", default="configs/gpu/learning", help="the learning experiment's configs")
    parser.add_argument("--variants-8b", help="speed8b: comma-separated variants of the 8B recipe, e.g. vllm55,tb16")
    parser.add_argument("--dry-run", action="store_true", help="print each stage's commands, run nothing")
    parser.add_argument("--list", action="store_true", help="list the stages")
    args = parser.parse_args(argv)
    if args.list or not args.stages:
        width = max(map(len, STAGES))
        print("\n".join(f"{name:<{width}} {describe(name)}" for name in STAGES))
        return 0
    unknown = [s for s in args.stages if s not in STAGES]
    if unknown:
        parser.error(f"unknown stage(s) {unknown}; stages: {', '.join(STAGES)}")
    if args.slots < 1:
        parser.error(f"--slots must be >= 1, got {args.slots}")
    if args.out is None:
        parser.error("--out is required to run stages")
    ctx = Context(
        out=args.out,
        work=args.work,
        seed=args.seed,
        seeds=args.seeds,
        only=args.only,
        steps=args.steps,
        limit=args.limit,
        phase_limit=args.phase_limit,
        configs=args.configs,
        slots=args.slots,
        stages=tuple(args.stages),
        dry_run=args.dry_run,
    )
    if args.variants:
        ctx.variants = args.variants.split(",")
    if args.variants_8b is not None:
        ctx.variants_8b = [v for v in args.variants_8b.split(",") if v]
    if not ctx.dry_run:
        print(f"== {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC | {header()}", flush=True)
    table = []
    with gpu_memory_samples(ctx):
        for name in args.stages:  # a failed stage is reported and the next one runs
            started = time.time()
            try:
                code = STAGES[name](ctx)
            except SystemExit as stop:  # a stage's own precondition (named in the message)
                print(f"[gpu] {name}: {stop}", file=sys.stderr)
                code = 2
            except Exception:  # a stage's own bug: reported, and the next stage still runs
                traceback.print_exc()
                code = 1
            table.append((name, code, time.time() - started))
            collect(ctx)
    width = max(len("stage"), *(len(n) for n, _, _ in table))
    print("\n".join([f"{'stage':<{width}}  rc   seconds", *(f"{n:<{width}} {c:>3} {s:>9.0f}" for n, c, s in table)]))
    return next((c for _, c, _ in table if c), 0)


if __name__ == "__main__":
    sys.exit(main())
