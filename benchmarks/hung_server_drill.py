"""The hung-server drill on CPU: `arc-trl train` in server mode (`async_rollouts: 1`) against the stand-in vLLM server,
which stops answering mid-step (connections accepted, nothing answered: what a hung or SIGSTOPped `trl vllm-serve`
does), once in the background rollout's generation and once in the weight push (docs/multigpu.md, "When a server stops
answering"):

    python benchmarks/hung_server_drill.py --out results/hung_server_drill.json [--timeout-s 2] [--repeats 3]

For each: the exit code, the seconds from the hang to the exit (the deadline `vllm_request_timeout_s` plus what the
run does before the error reaches the training thread and its teardown), the requests the server held (1: none was
resent), the processes the run started that are left (its sandbox's), and the error's last line. The run and the
stand-in: tests/hung_server_worker.py, tests/fake_vllm_server.py (its test: tests/integration/test_hung_server.py).
The same drill on a real `trl vllm-serve`, SIGSTOPped: `benchmarks/multigpu_drills.py --only student-server-stopped`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

CASES = {  # name -> (path whose next request is never answered, requests to it answered before)
    "generation": ("/v1/completions", 3),  # step 1's background rollout, while step 0 trains
    "weight-push": ("/start_weight_update", 1),  # step 1's push, on the training thread
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout-s", type=float, default=2.0, help="the run's vllm_request_timeout_s")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from hung_server_worker import run_drill

    from arc_trl.models.tiny_model import build_tiny_model, build_tokenizer

    drills = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "model")
        tokenizer = build_tokenizer()
        for name, (path, after) in CASES.items():
            for repeat in range(args.repeats):
                result = run_drill(model, Path(tmp) / f"{name}-{repeat}", tokenizer, after, args.timeout_s,
                                   hang_on=path, limit_s=600)
                lines = result.pop("stderr").strip().splitlines()
                result.pop("stdout")
                error = next((line for line in reversed(lines) if "ServerUnresponsive" in line), None)
                drills.append({"drill": name, "repeat": repeat, **result,
                               "leftover_processes": len(result["leftover"]),
                               "error": error.replace(tmp, "TMP") if error else lines[-3:]})
                print(f"{name} #{repeat}: exit {result['exit_code']} {result['stopped_s']} s after the hang, "
                      f"{result['held_requests']} request(s) held, {len(result['leftover'])} left", flush=True)
    summary = {name: {"exit_codes": sorted({d["exit_code"] for d in drills if d["drill"] == name}),
                      "stopped_s_median": statistics.median(d["stopped_s"] for d in drills if d["drill"] == name),
                      "stopped_s_max": max(d["stopped_s"] for d in drills if d["drill"] == name),
                      "leftover_processes": sum(d["leftover_processes"] for d in drills if d["drill"] == name)}
               for name in CASES}
    record = {"command": f"python benchmarks/hung_server_drill.py --out {args.out} --timeout-s {args.timeout_s:g} "
                         f"--repeats {args.repeats}",
              "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
              "vllm_request_timeout_s": args.timeout_s, "summary": summary, "drills": drills}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    ok = all(d["exit_code"] == 1 and d["leftover_processes"] == 0 and d["held_requests"] == 1 for d in drills)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
