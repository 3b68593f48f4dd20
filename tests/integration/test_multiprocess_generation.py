"""Two training processes with unequal numbers of active episodes, through the vLLM-server generation paths: each
process's own requests (the default), and TRL's real gathered server branch (the structured-output fallback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from multiprocess_generation_worker import CASES

ROOT = Path(__file__).resolve().parents[2]


def test_each_process_gets_the_completion_of_its_own_context(tmp_path):
    """Processes with unequal request counts (or caps) must get, token for token, the completion of their own
    context, cut to their own cap. Streamed: each process sends one request per sequence with its own cap, nothing
    gathered or padded. Gathered: TRL's server branch gathers the requests of all processes, calls the server once
    with the main process's `max_tokens` and slices the results by `process_index * len(local requests)`."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(ROOT / "tests" / "multiprocess_generation_worker.py"), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    wrong = []
    for mode in ("streamed", "gathered"):
        for rank, results in enumerate(ranks):
            for name in CASES:
                case = results[mode][name]
                if "error" in case["got"]:
                    wrong.append((mode, name, rank, case["got"]["error"]))
                elif case["got"]["ids"] != case["expected_ids"]:
                    wrong.append((mode, name, rank, "completions", case["got"]["ids"], case["expected_ids"]))
                elif case["got"]["logprobs"] != case["expected_logprobs"]:  # a missing logprob stays NaN (None)
                    wrong.append((mode, name, rank, "logprobs", case["got"]["logprobs"], case["expected_logprobs"]))
    assert not wrong, "\n".join(map(str, wrong))
    # streamed: each process's own single-prompt requests, with its own cap
    for rank in (0, 1):
        expected = sorted((1, c[1] if rank == 0 else c[3]) for c in CASES.values() for _ in c[0 if rank == 0 else 2])
        got = sorted((call["num_prompts"], call["max_tokens"]) for call in ranks[rank]["streamed"]["server_calls"])
        assert got == expected
    # gathered: one server call per case, for the padded batch (largest count of the two processes), largest cap
    expected_calls = [
        {"num_prompts": 2 * max(len(c[0]), len(c[2])), "max_tokens": max(c[1], c[3])} for c in CASES.values()
    ]
    assert ranks[0]["gathered"]["server_calls"] == expected_calls
    assert ranks[1]["gathered"]["server_calls"] == []
