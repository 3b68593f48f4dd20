"""Sandbox resource limits: memory of a batch of episodes, disk and file-count quotas, cleanup of file bombs.

    python benchmarks/sandbox_limits_bench.py [--episodes 64] [--hostile 16] [--bomb-seconds 5]

Prints: the memory of `--episodes` idle sessions after an ordinary run; the memory of `--hostile` sessions that each
keep as much as the defaults let them (an array just under `idle_memory_mb`, a working directory filled to
`disk_mb`), extrapolated to `--episodes`; what a 1 GB write and `--bomb-runs` runs of a `--bomb-seconds` file bomb
achieve; how long closing a bombed session keeps the zygote (and a bystander session's calls) busy, and when its
files are gone, with and without the private tmpfs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arc_trl.data.task import ArcTask, Pair
from arc_trl.sandbox import SandboxConfig, SandboxPool

ORDINARY = "g = np.array(train_inputs[0])\nout = np.rot90(g)\nprint(out.tolist())"
WRITE_1GB = ("block = b'x' * (1 << 20)\nn = 0\ntry:\n    for i in range(1024):\n"
             "        with open(f'w{i}', 'wb') as f:\n            f.write(block)\n        n += 1\n"
             "except OSError as e:\n    print(n, 'MB then', e.strerror)\nelse:\n    print(n, 'MB')")
BOMB = ("import os\nn = 0\ntry:\n    while True:\n        os.close(os.open(f'f{n}', os.O_CREAT | os.O_WRONLY))\n"
        "        n += 1\nexcept BaseException as e:\n    print(n, type(e).__name__)")
FILL_DISK = ("try:\n    for i in range(1024):\n        with open(f'd{i}', 'wb') as f:\n"
             "            f.write(b'x' * (1 << 20))\nexcept OSError:\n    pass")


def task() -> ArcTask:
    return ArcTask("bench", [Pair([[1, 2], [3, 4]], [[2, 1], [4, 3]])], [[[5, 6]]], [[[6, 5]]])


def pss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def shmem_mb() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) / 1024
    return 0.0


def idle_batch(pool: SandboxPool, n: int) -> None:
    sessions = [pool.new_session(task()) for _ in range(n)]
    for s in sessions:
        s.run(ORDINARY)
    total = sum(pss_mb(s._child.pid) for s in sessions)
    print(f"{n} idle sessions after an ordinary run: PSS {total:.0f} MB in all ({total / n:.1f} MB each)")
    for s in sessions:
        s.close()


def hostile_batch(pool: SandboxPool, n: int, episodes: int) -> None:
    cfg = pool.config
    keep_mb = cfg.idle_memory_mb - 40  # Python + numpy are ~28 MB resident; stay under the limit
    sessions = [pool.new_session(task()) for _ in range(n)]
    shmem_before = shmem_mb()
    restarted = 0
    for s in sessions:
        r = s.run(f"keep = np.ones({keep_mb} * 2**20 // 8)")
        restarted += r.restarted
        s.run(FILL_DISK)
    pss = sum(pss_mb(s._child.pid) for s in sessions)
    disk = shmem_mb() - shmem_before
    per = (pss + disk) / n
    print(f"{n} sessions each keeping a {keep_mb} MB array and a full working directory ({restarted} restarted): "
          f"PSS {pss:.0f} MB + tmpfs {disk:.0f} MB = {per:.0f} MB per session; "
          f"{episodes} such episodes: {per * episodes / 1024:.1f} GB")
    big = pool.new_session(task())
    r = big.run(f"keep = np.ones({cfg.idle_memory_mb + 50} * 2**20 // 8)")
    print(f"a session keeping {cfg.idle_memory_mb + 50} MB: restarted={r.restarted} ({r.note[:60]}...)")
    for s in [*sessions, big]:
        s.close()


def disk_and_bomb(pool: SandboxPool, label: str, bomb_seconds: float, bomb_runs: int) -> None:
    with pool.new_session(task()) as s:
        start = time.perf_counter()
        r = s.run(WRITE_1GB)
        print(f"[{label}] 1 GB write: {r.stdout.strip()} in {time.perf_counter() - start:.2f} s")
    bystander = pool.new_session(task())
    bystander.run("x = 1")
    s = pool.new_session(task())
    created = []
    for _ in range(bomb_runs):
        r = s.run(BOMB.replace("n = 0", f"n = {sum(created)}"), timeout_s=bomb_seconds)
        created.append(int(r.stdout.split()[0]) - sum(created) if r.stdout.strip() else 0)
    waits: list[float] = []
    stop = threading.Event()

    def poll_bystander() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            bystander.run("x += 1")
            waits.append(time.perf_counter() - t)

    thread = threading.Thread(target=poll_bystander)
    thread.start()
    start = time.perf_counter()
    s.close()
    closed = time.perf_counter() - start
    time.sleep(0.5)
    trash = Path(pool.config.work_root or tempfile.gettempdir()) / "arc-sandbox-trash"
    while trash.is_dir() and any(trash.iterdir()):
        time.sleep(0.05)
    emptied = time.perf_counter() - start
    stop.set()
    thread.join()
    print(f"[{label}] file bomb, {bomb_runs} runs of {bomb_seconds:g} s: {sum(created)} files "
          f"({r.stdout.strip().split()[-1] if r.stdout.strip() else r.status}); close() took {closed:.2f} s; "
          f"files gone after {emptied:.2f} s; bystander's slowest call meanwhile {max(waits) * 1000:.0f} ms "
          f"({len(waits)} calls)")
    bystander.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--hostile", type=int, default=16, help="sessions of the worst-case batch actually started")
    parser.add_argument("--bomb-seconds", type=float, default=5.0)
    parser.add_argument("--bomb-runs", type=int, default=3)
    args = parser.parse_args()
    cfg = SandboxConfig(timeout_s=30.0)
    print(f"defaults: memory_mb={cfg.memory_mb} idle_memory_mb={cfg.idle_memory_mb} disk_mb={cfg.disk_mb} "
          f"max_files={cfg.max_files}")
    with SandboxPool(num_workers=2, config=cfg) as pool:
        idle_batch(pool, args.episodes)
        hostile_batch(pool, args.hostile, args.episodes)
        disk_and_bomb(pool, "private tmpfs", args.bomb_seconds, args.bomb_runs)
    # audit hook off: the bomb as fast as code that bypassed it (os.open is audited: ~5x slower with the hook)
    bare = SandboxConfig(timeout_s=30.0, private_tmpfs=False, audit_hook=False)
    with SandboxPool(num_workers=2, config=bare) as pool:
        disk_and_bomb(pool, "no tmpfs", args.bomb_seconds, args.bomb_runs)


if __name__ == "__main__":
    main()
