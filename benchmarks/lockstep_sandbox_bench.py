"""The sandbox's share of a lock-step rollout step: what the GPU waits for while code runs (`time/sandbox`).

    python benchmarks/lockstep_sandbox_bench.py [--episodes 64] [--workers 8] [--generate-s 1.0] [--repeats 5]
    python benchmarks/lockstep_sandbox_bench.py --code-root /path/to/other/checkout   # the same, another arc_trl

A batch of `--episodes` synthetic tasks of the learning curriculum (`configs/gpu/learning/grpo-opd.yaml`'s families
and difficulty) plays the SFT transcripts' two REPL turns (inspect the train pairs; define `transform`, check it and
SUBMIT: what the policy learned to write) the way `run_episodes` plays them: sessions opened, the first turn's
generation (a sleep of `--generate-s`, the GPU's), turn 1's code runs, turn 2's generation (not counted), turn 2's
code runs, sessions closed. It prints the seconds of each part that the step waits for, per repeat and their median.
Every turn's result is checked (the second must submit the right answer). A checkout without
`SandboxPool.open_sessions` (before the sessions started in the background) is played with its `new_session` and
`close` calls, as its `run_episodes` did.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(episodes: int, workers: int, generate_s: float, repeats: int, seed: int) -> dict:
    from arc_trl.tasks import load_tasks
    from arc_trl.sandbox import SandboxConfig, SandboxPool
    from arc_trl.synthetic.transcripts import repl_turns

    spec = f"synthetic:n={episodes},seed={seed},difficulty=tiny"
    tasks = load_tasks(spec)
    turns = [repl_turns(task) for task in tasks]
    parts: dict[str, list[float]] = {"open": [], "turn1": [], "turn2": [], "close": []}
    with SandboxPool(workers, SandboxConfig(timeout_s=2.0)) as pool:
        background = hasattr(pool, "open_sessions")
        for _ in range(repeats):
            t = time.perf_counter()
            sessions = pool.open_sessions(tasks) if background else [pool.new_session(task) for task in tasks]
            parts["open"].append(time.perf_counter() - t)
            time.sleep(generate_s)  # the first turn generates
            for k in (0, 1):
                t = time.perf_counter()
                results = pool.map_turns([(s, ts[k]) for s, ts in zip(sessions, turns)])
                parts[f"turn{k + 1}"].append(time.perf_counter() - t)
                bad = [task.id for task, r in zip(tasks, results)
                       if (r.submitted is None) == (k == 1) or any(x.status != "ok" for x in r.results)]
                if bad:
                    raise SystemExit(f"turn {k + 1} did not run as the transcript should for tasks {bad[:5]}")
            t = time.perf_counter()
            if background:
                pool.close_sessions(sessions)
            else:
                for session in sessions:
                    session.close()
            parts["close"].append(time.perf_counter() - t)
            time.sleep(0.5)  # the training phase: background kills finish
    totals = [sum(values) for values in zip(*parts.values())]
    return {"spec": spec, "episodes": episodes, "workers": workers, "generate_s": generate_s,
            "background_sessions": background, "cores": os.cpu_count(),
            "seconds": {k: [round(v, 4) for v in values] for k, values in parts.items()},
            "median_s": {**{k: round(statistics.median(v), 4) for k, v in parts.items()},
                         "sandbox_total": round(statistics.median(totals), 4)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--workers", type=int, default=8, help="sandbox workers (the learning config's 8)")
    parser.add_argument("--generate-s", type=float, default=1.0, help="stand-in for the first turn's generation")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--code-root", help="measure this checkout's arc_trl (in a subprocess)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON only")
    args = parser.parse_args()
    if args.code_root:
        argv = [a for a in sys.argv[1:] if a != "--json"]
        i = argv.index("--code-root")
        del argv[i:i + 2]
        path = os.pathsep.join(p for p in (args.code_root, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path, "LOCKSTEP_BENCH_CODE_ROOT": args.code_root}
        out = subprocess.run([sys.executable, __file__, *argv, "--json"], check=True, capture_output=True, text=True,
                             env=env, cwd=args.code_root).stdout
        result = json.loads(out)
        result["code_root"] = args.code_root
    else:
        sys.path.insert(0, os.environ.get("LOCKSTEP_BENCH_CODE_ROOT") or str(ROOT))
        result = measure(args.episodes, args.workers, args.generate_s, args.repeats, args.seed)
    if args.json:
        print(json.dumps(result))
        return
    m = result["median_s"]
    print(f"{result.get('code_root', ROOT)}: {result['episodes']} episodes, {result['workers']} workers, "
          f"{result['cores']} cores, sessions started in the background: {result['background_sessions']}")
    print("  per repeat (s): " + "; ".join(f"{k} {v}" for k, v in result["seconds"].items()))
    print(f"  median: open {m['open']:.3f} + turn 1 {m['turn1']:.3f} + turn 2 {m['turn2']:.3f} + close "
          f"{m['close']:.3f} = {m['sandbox_total']:.3f} s on the step's critical path")


if __name__ == "__main__":
    main()
