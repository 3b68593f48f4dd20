"""`arc-trl train` (`train_entry.main`) against the stand-in vLLM server, as a process of its own: the trainer of
tests/integration/test_hung_server.py and benchmarks/hung_server_drill.py.

    python tests/hung_server_worker.py MODEL_DIR OUT_DIR SERVER_URL TIMEOUT_S [extra training flags]

A tiny `async_rollouts: 1` run in server mode (one turn per episode, two episodes a step, the sandbox running the
replies' code). Only TRL's `VLLMGeneration` is replaced, by `PushingVLLMGeneration`: it makes the server client as
TRL does (by the name `VLLMClient` of TRL's module, so the trainer's deadlines apply to it) and its `sync_weights`
sends the weight push's HTTP requests (`start_weight_update`, `finish_weight_update`) without NCCL. Everything else
is the command's: the config parsing, `trainer.train()`, its `finally: trainer.close()`, the exit code.

`run_drill` (in the caller's process) serves the stand-in, which stops answering after `hang_after` requests to a
path (a hung or SIGSTOPped server), runs this script against it and records how the run ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from async_harness import FakeVLLMGeneration, reply_ids
from fake_vllm_server import FakeVllmServer
from process_marks import MARK, marked

TASKS = "6150a2bd,67a3c6ac,68b16354,74dd1130"


class PushingVLLMGeneration(FakeVLLMGeneration):
    """TRL's server-mode `VLLMGeneration` without NCCL: its client built as TRL builds it, its push over HTTP."""

    def __init__(self, **kwargs) -> None:
        import trl.generation.vllm_generation as vllm_generation

        super().__init__(**kwargs)
        self.vllm_client = vllm_generation.VLLMClient(base_url=self.server_base_url,
                                                      connection_timeout=self.server_timeout)

    def sync_weights(self) -> None:
        with self.vllm_client.weight_update():  # POST /start_weight_update, then /finish_weight_update
            pass


def argv(model_dir: str, out: str, url: str, timeout_s: str, extra: list[str]) -> list[str]:
    return ["--model_name_or_path", model_dir, "--output_dir", out, "--dataset", "arc-agi-1/train",
            "--task_ids", *TASKS.split(","), "--shuffle_dataset", "false", "--max_turns", "1",
            "--max_tokens_per_turn", "32", "--max_completion_length", "64", "--num_generations", "2",
            "--per_device_train_batch_size", "2", "--max_steps", "3", "--logging_steps", "1", "--save_strategy", "no",
            "--learning_rate", "1e-3", "--beta", "0.0", "--use_cpu", "true", "--bf16", "false", "--report_to", "none",
            "--seed", "0", "--sandbox_workers", "1", "--collapse_guard", "off", "--use_vllm", "true",
            "--vllm_mode", "server", "--vllm_server_base_url", url, "--vllm_server_timeout", timeout_s,
            "--async_rollouts", "1", "--vllm_request_timeout_s", timeout_s, *extra]


def main(model_dir: str, out: str, url: str, timeout_s: str, *extra: str) -> None:
    import trl.trainer.grpo_trainer as grpo_trainer

    from arc_trl.train_entry import main as train

    grpo_trainer.VLLMGeneration = PushingVLLMGeneration  # TRL's would open an NCCL group to the server
    train(argv(model_dir, out, url, timeout_s, list(extra)))


def run_drill(model_dir: str | Path, out: Path, tokenizer, hang_after: int, timeout_s: float,
              hang_on: str = "/v1/completions", limit_s: float = 600.0) -> dict:
    """Run the trainer against a stand-in server that stops answering after `hang_after` requests to `hang_on`;
    returns the exit code, the seconds from the hang to the exit (`stopped_s`), stderr, and the processes the run
    started that are still alive once it has exited (`leftover`: its sandbox's, marked in their environment)."""
    server = FakeVllmServer(reply_ids(tokenizer), engines=1, hang_after=hang_after, hang_on=hang_on)
    server.on_post = lambda path, body: {} if path in ("/start_weight_update", "/finish_weight_update") else None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out.mkdir(parents=True, exist_ok=True)
    mark = f"hung-server-{uuid.uuid4().hex[:8]}"
    here = Path(__file__).resolve().parent
    env = {**os.environ, MARK: mark, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(here.parent), str(here), os.environ.get("PYTHONPATH", "")]),
           "ARC_TRL_SERVER_LOGS": json.dumps({server.url: str(out / "student-vllm.log")})}
    command = [sys.executable, str(Path(__file__).resolve()), str(model_dir), str(out / "run"), server.url,
               f"{timeout_s:g}"]
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    result: dict = {"hang_on": hang_on, "hang_after": hang_after, "timeout_s": timeout_s}
    try:
        output = process.communicate(timeout=limit_s)
        result["exit_code"] = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output = process.communicate()
        result["exit_code"] = None  # still running after limit_s
    finally:
        ended = time.monotonic()
        server.resume.set()
        server.shutdown()
        server.server_close()
    time.sleep(0.5)  # the sandbox's processes leave once their parent has gone (PR_SET_PDEATHSIG)
    result.update({
        "hung": server.hung.is_set(), "held_requests": server.held, "posts": dict(server.counts),
        "started_s": round(server.hung_at - started, 1) if server.hung_at is not None else None,
        "stopped_s": round(ended - server.hung_at, 1) if server.hung_at is not None else None,
        "stdout": output[0], "stderr": output[1], "leftover": marked(mark),
    })
    return result


if __name__ == "__main__":
    main(*sys.argv[1:])
