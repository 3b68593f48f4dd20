"""Sandbox speed: warm-session latency and throughput against a fresh `python -c` per call, and time to contain
hostile code.

    python benchmarks/sandbox_bench.py [--calls 500] [--baseline-calls 20] [--workers 2]

Runs in well under 2 minutes on a 2-core machine. The baseline is the naive way to run untrusted code: one fresh
interpreter per call (`python -c "import numpy; ..."`), which is what the sandbox's warm sessions replace.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arc_trl.data.task import ArcTask, Pair
from arc_trl.sandbox import SandboxConfig, SandboxPool

SNIPPET = "x = train_inputs[0].sum() + 1"
BASELINE = "import numpy as np; x = np.array([[1, 2], [3, 4]]).sum() + 1"
HOSTILE = {
    "infinite loop (soft timeout 1 s)": "while True:\n    pass",
    "C-level loop (hard kill at 1 s + 0.5 s grace)": "sum(range(10 ** 13))",
    "memory bomb (8 GB)": "x = bytearray(8 * 1024 ** 3)",
    "memory creep (100 MB chunks)": "c = []\nwhile True:\n    c.append(bytearray(10 ** 8))",
    "fork bomb": "import os\nwhile True:\n    os.fork()",
    "100 MB print": "print('x' * 100_000_000)",
    "segfault (C stack overflow)": ("import sys\nsys.setrecursionlimit(10 ** 6)\n"
                                    "def f(n):\n    return sorted([n], key=lambda x: list(map(f, [x + 1])))\nf(0)"),
    "os._exit": "import os\nos._exit(1)",
}


def task() -> ArcTask:
    return ArcTask("bench", [Pair([[1, 2], [3, 4]], [[2, 1], [4, 3]])], [[[5, 6]]], [[[6, 5]]])


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def sandbox_latency(pool: SandboxPool, calls: int) -> list[float]:
    with pool.new_session(task()) as s:
        for _ in range(20):  # warm-up
            s.run(SNIPPET)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            r = s.run(SNIPPET)
            times.append(time.perf_counter() - start)
            assert r.status == "ok", r.stderr
    return times


def sandbox_throughput(pool: SandboxPool, workers: int, seconds: float) -> float:
    sessions = [pool.new_session(task()) for _ in range(workers)]
    counts = [0] * workers
    deadline = time.perf_counter() + seconds

    def loop(i: int) -> None:
        while time.perf_counter() < deadline:
            sessions[i].run(SNIPPET)
            counts[i] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for s in sessions:
        s.close()
    return sum(counts) / elapsed


def baseline_call() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", BASELINE], check=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    return time.perf_counter() - start


def baseline_throughput(workers: int, calls: int) -> float:
    counts = [0] * workers
    per_worker = max(1, calls // workers)

    def loop(i: int) -> None:
        for _ in range(per_worker):
            baseline_call()
            counts[i] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - start)


def session_start_times(pool: SandboxPool, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        s = pool.new_session(task())
        times.append(time.perf_counter() - start)
        s.close()
    return times


def hostile_times(pool: SandboxPool) -> list[tuple[str, str, float, float]]:
    """(case, status, seconds to the result, seconds until the session answers again)."""
    rows = []
    with pool.new_session(task()) as s:
        for name, code in HOSTILE.items():
            start = time.perf_counter()
            r = s.run(code)
            contained = time.perf_counter() - start
            s.run("c = x = None")
            ok = s.run("print(1)")
            assert ok.stdout == "1\n", (name, ok)
            rows.append((name, f"{r.status}/{r.error_kind}", contained, time.perf_counter() - start))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="sandbox calls for the latency figures")
    parser.add_argument("--baseline-calls", type=int, default=20, help="fresh interpreters for the baseline")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="parallel sessions / processes")
    parser.add_argument("--throughput-seconds", type=float, default=3.0)
    args = parser.parse_args()

    bench_start = time.perf_counter()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")
    config = SandboxConfig(timeout_s=1.0, kill_grace_s=0.5, memory_mb=1024)
    with SandboxPool(num_workers=args.workers, config=config) as pool:
        print(f"protections: {pool.protections or '(reported after the first session)'}")
        latency = sandbox_latency(pool, args.calls)
        print(f"protections: {pool.protections}")
        throughput = sandbox_throughput(pool, args.workers, args.throughput_seconds)
        starts = session_start_times(pool, 50)
        hostile = hostile_times(pool)
    baseline = [baseline_call() for _ in range(args.baseline_calls)]
    baseline_tp = baseline_throughput(args.workers, args.baseline_calls)

    p50, p95 = percentile(latency, 0.5), percentile(latency, 0.95)
    b50, b95 = percentile(baseline, 0.5), percentile(baseline, 0.95)
    print()
    print("| measure | sandbox (warm session) | fresh `python -c` + numpy | ratio |")
    print("|---|---|---|---|")
    print(f"| latency p50 | {p50 * 1e3:.2f} ms | {b50 * 1e3:.1f} ms | {b50 / p50:.0f}x |")
    print(f"| latency p95 | {p95 * 1e3:.2f} ms | {b95 * 1e3:.1f} ms | {b95 / p95:.0f}x |")
    print(f"| throughput ({args.workers} parallel) | {throughput:.0f} calls/s | {baseline_tp:.1f} calls/s | "
          f"{throughput / baseline_tp:.0f}x |")
    print(f"| new session | {statistics.median(starts) * 1e3:.1f} ms (p50), "
          f"{percentile(starts, 0.95) * 1e3:.1f} ms (p95) | - | - |")
    print()
    print("| hostile case | outcome | time to result | until the session answers again |")
    print("|---|---|---|---|")
    for name, outcome, contained, usable in hostile:
        print(f"| {name} | {outcome} | {contained:.3f} s | {usable:.3f} s |")
    print()
    print(f"goal p50 <= 5 ms: {'met' if p50 <= 0.005 else 'NOT met'}; "
          f"goal >= 30x faster than the baseline: {'met' if b50 / p50 >= 30 else 'NOT met'} ({b50 / p50:.0f}x)")
    print(f"benchmark took {time.perf_counter() - bench_start:.1f} s")


if __name__ == "__main__":
    main()
