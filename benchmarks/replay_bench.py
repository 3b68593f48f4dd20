"""Replay throughput of `evaluate.py score` on long programs: completions/s and the scorer's own CPU per completion.

    python benchmarks/replay_bench.py [--attempts 800] [--chars 30000] [--workers 2] [--repeats 1]

Generates a dataset (8 synthetic tasks, 3 train pairs of 10x10 grids, 1 test input) and a completions file of long
programs (~`--chars` characters of code each: many helper functions plus `transform`). Half the attempts are REPL
style (a block defining the program, a second block calling `SUBMIT`), half are programs whose `transform` is applied
to every train and test input (`--mode auto`). Then it scores the file with `arc_trl.eval.score.main` in a
subprocess (`--workers` sessions in parallel) and prints completions/s, the scorer process's own CPU per completion
(user + system, getrusage of that process: the sandbox processes are not in it) and its peak RSS. A run on the first
`--small` lines measures the fixed cost (imports, sandbox start, writing outputs and plots), which is also printed
taken out of both figures (the marginal cost of one more completion).

The script only uses the command-line entry point, so the same file measures another checkout:

    PYTHONPATH=/path/to/other/checkout python benchmarks/replay_bench.py --code-root /path/to/other/checkout
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def helper_source(index: int, seed: int) -> str:
    return (
        f"def helper_{index}(grid, k={seed % 7 + index}):\n"
        f'    """Helper {index} of attempt {seed}: recolour the cells on a diagonal pattern, then vote."""\n'
        "    out = np.array(grid, dtype=int).copy()\n"
        "    h, w = out.shape\n"
        "    for r in range(h):\n"
        "        for c in range(w):\n"
        f"            if (r * {index + 3} + c + k) % {index % 5 + 2} == 0:\n"
        "                out[r, c] = (out[r, c] + k) % 10\n"
        "    counts = [int((out == v).sum()) for v in range(10)]\n"
        "    best = max(range(10), key=lambda v: counts[v])\n"
        "    return out if best >= 0 else grid\n\n"
    )


def long_program(seed: int, chars: int) -> str:
    parts, size, index = ["import numpy as np\n\n"], 0, 0
    while size < chars:
        parts.append(helper_source(index, seed))
        size += len(parts[-1])
        index += 1
    parts.append("def transform(grid):\n    grid = np.array(grid, dtype=int)\n    return np.fliplr(grid)\n")
    return "".join(parts)


def completion(seed: int, chars: int) -> str:
    program = long_program(seed, chars)
    if seed % 2:
        return f"Mirror each row.\n```python\n{program}```\n```python\nSUBMIT([transform(g) for g in test_inputs])\n```"
    return f"A program:\n```python\n{program}```"


def write_inputs(folder: Path, attempts: int, chars: int) -> tuple[Path, Path]:
    import random

    rng = random.Random(0)
    tasks = folder / "tasks"
    tasks.mkdir()
    ids = [f"task{i}" for i in range(8)]
    for task_id in ids:
        grids = [[[rng.randrange(10) for _ in range(10)] for _ in range(10)] for _ in range(4)]
        pairs = [{"input": g, "output": [row[::-1] for row in g]} for g in grids]
        (tasks / f"{task_id}.json").write_text(json.dumps({"train": pairs[:3], "test": pairs[3:]}))
    path = folder / "completions.jsonl"
    with open(path, "w") as f:
        for i in range(attempts):
            f.write(json.dumps({"task_id": ids[i % len(ids)], "completion": completion(i, chars)}) + "\n")
    return tasks, path


def score_once(tasks: Path, completions: Path, out: Path, workers: int) -> dict:
    """Run in the child process: score the file, return wall time and this process's own CPU and peak RSS."""
    import arc_trl
    from arc_trl.eval.score import main

    argv = ["--dataset", str(tasks), "--completions", str(completions), "--output-dir", str(out),
            "--workers", str(workers), "--no-progress"]
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    code = main(argv)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    metrics = json.loads((out / "metrics.json").read_text())
    return {"exit": code, "wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "max_rss_mb": after.ru_maxrss / 1024, "n_attempts": metrics["n_attempts"],
            "pass_rate": metrics["pass_rate"], "status_counts": metrics["status_counts"],
            "arc_trl": str(Path(arc_trl.__file__).parent.parent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=800)
    parser.add_argument("--chars", type=int, default=30_000, help="characters of code per completion")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--small", type=int, default=16, help="attempts of the run that measures the fixed cost")
    parser.add_argument("--code-root", default=str(ROOT), help="checkout whose arc_trl is measured")
    parser.add_argument("--child", nargs=4, metavar=("TASKS", "COMPLETIONS", "OUT", "WORKERS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tasks, completions, out, workers = args.child
        sys.path.insert(0, os.environ["REPLAY_BENCH_CODE_ROOT"])
        print(json.dumps(score_once(Path(tasks), Path(completions), Path(out), int(workers))))
        return

    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        folder = Path(tmp)
        tasks, completions = write_inputs(folder, args.attempts, args.chars)
        small = folder / "small.jsonl"  # the first lines: measures the fixed cost (imports, pool start, outputs)
        with open(completions) as f, open(small, "w") as out:
            out.writelines(next(f) for _ in range(args.small))
        size = completions.stat().st_size
        print(f"code root {args.code_root}; {args.attempts} attempts, {size / 1e6:.1f} MB "
              f"({size / args.attempts / 1e3:.1f} kB per line); {args.workers} workers; {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.2f}; Python {platform.python_version()}")
        env = {**os.environ, "REPLAY_BENCH_CODE_ROOT": args.code_root}

        def score(path: Path, out: Path, n: int) -> dict:
            proc = subprocess.run([sys.executable, __file__, "--child", str(tasks), str(path), str(out),
                                   str(args.workers)], env=env, capture_output=True, text=True, cwd=args.code_root)
            if proc.returncode != 0:
                sys.exit(f"scoring failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            assert r["exit"] == 0 and r["n_attempts"] == n and r["pass_rate"] == 1.0, r
            return r

        for repeat in range(args.repeats):
            base = score(small, folder / f"small{repeat}", args.small)
            r = score(completions, folder / f"out{repeat}", args.attempts)
            n, extra = r["n_attempts"], r["n_attempts"] - args.small
            print(f"run {repeat + 1} ({r['arc_trl']}): {n / r['wall_s']:.1f} completions/s ({r['wall_s']:.1f} s), "
                  f"scorer CPU {1000 * r['cpu_s'] / n:.2f} ms per completion, peak RSS {r['max_rss_mb']:.0f} MB; "
                  f"fixed cost ({args.small} attempts: {base['wall_s']:.1f} s, {base['cpu_s']:.2f} s CPU) taken out: "
                  f"{extra / (r['wall_s'] - base['wall_s']):.1f} completions/s, scorer CPU "
                  f"{1000 * (r['cpu_s'] - base['cpu_s']) / extra:.2f} ms per completion; "
                  f"load average now {os.getloadavg()[0]:.2f}")

if __name__ == "__main__":
    main()
