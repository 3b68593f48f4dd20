"""Does every data-parallel engine of a student server get the trainer's weights? (GPU; docs/multigpu.md)

    python benchmarks/engine_sync_check.py --model /tmp/arc-gpu/qwen3-0.6b --gpus 0,1,2 --out check.json

Starts `trl vllm-serve --data-parallel-size 2` on the first two GPUs (float32, so greedy tokens are not decided by
rounding) and plays the trainer on the third: the model with a LoRA adapter whose B is random (so the policy differs
from the served base), pushed over TRL's NCCL weight transfer with the trainer's own LoRA walk
(`arc_trl.integrations.lora_merge.merged_named_params`). Temperature-0 tokens pinned to each engine (vLLM's
`X-data-parallel-rank`), before and after the push, are compared with the trainer's greedy tokens of the merged
policy and of the base: before, each engine should agree with the base; after, with the merged policy. Which engine
served each request is read from vLLM's per-engine finished-request counters (/metrics), so a header the server
ignored shows up as `routing_verified: false` rather than as two answers from one engine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOKENS = 24
ENGINES = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with code {server.returncode} before becoming healthy")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(2)
    raise RuntimeError(f"the server was not healthy after {timeout_s:.0f} s")


def finished_per_engine(url: str) -> dict[str, float] | None:
    """vLLM's `vllm:request_success_total` summed per `engine` label (its Prometheus /metrics), None without it."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total{") and 'engine="' in line:
            engine = line.split('engine="', 1)[1].split('"', 1)[0]
            totals[engine] = totals.get(engine, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals or None


def agreement(a: list[int], b: list[int]) -> int:
    """How many leading tokens two sequences share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--gpus", default="0,1,2", help="two engines' GPUs, then the trainer's")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--log", type=Path, default=Path("/tmp/arc-gpu/logs/engine-check-server.log"))
    args = parser.parse_args(argv)
    gpus = args.gpus.split(",")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpus[2]  # this process: the trainer's GPU, before torch starts CUDA

    port = free_port()
    command = [shutil.which("trl") or "trl", "vllm-serve", "--model", args.model, "--data_parallel_size",
               str(ENGINES), "--port", str(port), "--dtype", "float32", "--gpu_memory_utilization", "0.5",
               "--max_model_len", "2048"]
    args.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(gpus[:2]), "NCCL_NVLS_ENABLE": "0"}
    server = subprocess.Popen(command, env=env, stdout=open(args.log, "w"), stderr=subprocess.STDOUT,  # noqa: SIM115
                              start_new_session=True)
    try:
        return check(args, f"http://127.0.0.1:{port}", server)
    finally:
        os.killpg(server.pid, 15)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)


def check(args, url: str, server: subprocess.Popen) -> int:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.generation.vllm_client import VLLMClient

    from arc_trl.integrations.lora_merge import merged_named_params
    from arc_trl.integrations.trl_internals import DATA_PARALLEL_RANK_HEADER, server_engines

    wait_healthy(url, server, 600)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    prompt = tokenizer("Solve the ARC task: rotate the grid by 90 degrees.", add_special_tokens=False)["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).cuda()
    policy = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.copy_((torch.randn(param.shape, generator=generator) * 0.05).to(param.device))

    def greedy(adapter: bool) -> list[int]:
        ids = torch.tensor([prompt], device="cuda")
        with torch.no_grad():
            if adapter:
                out = policy.generate(input_ids=ids, max_new_tokens=TOKENS, do_sample=False, min_new_tokens=TOKENS)
            else:
                with policy.disable_adapter():
                    out = policy.generate(input_ids=ids, max_new_tokens=TOKENS, do_sample=False,
                                          min_new_tokens=TOKENS)
        return out[0, len(prompt):].tolist()

    clients = []
    for engine in range(ENGINES):
        client = VLLMClient(base_url=url, group_port=free_port(), connection_timeout=60)
        client.session.headers[DATA_PARALLEL_RANK_HEADER] = str(engine)
        clients.append(client)
    engines = server_engines(clients[0])

    served_by: list[str | None] = []  # which engine's finished-request counter moved for each pinned request

    def engine_tokens() -> list[list[int]]:
        outs = []
        for client in clients:
            before = finished_per_engine(url)
            out = client.generate(prompts=[prompt], max_tokens=TOKENS, temperature=0.0, logprobs=None,
                                  generation_kwargs={"min_tokens": TOKENS})
            after = finished_per_engine(url)
            moved = [e for e in (after or {}) if (after or {})[e] > (before or {}).get(e, 0.0)]
            served_by.append(moved[0] if len(moved) == 1 else None)
            outs.append(list(out["completion_ids"][0]))
        return outs

    base_tokens, policy_tokens = greedy(adapter=False), greedy(adapter=True)
    before = engine_tokens()
    pusher = clients[0]
    pusher.init_communicator(device=0)
    started = time.time()
    names = [(name, str(t.dtype).removeprefix("torch."), list(t.shape))
             for name, t in merged_named_params(policy, lambda n: n)]
    pusher.update_named_params(names, merged_named_params(policy, lambda n: n))
    pusher.reset_prefix_cache()
    push_s = time.time() - started
    after = engine_tokens()
    pusher.close_communicator()

    result = {
        "engines_reported_by_server": engines,
        "tokens": TOKENS,
        "weight_push_s": round(push_s, 3),
        "policy_differs_from_base": base_tokens != policy_tokens,
        "before": [{"engine": e, "agrees_with_base": agreement(t, base_tokens),
                    "agrees_with_policy": agreement(t, policy_tokens)} for e, t in enumerate(before)],
        "after": [{"engine": e, "agrees_with_base": agreement(t, base_tokens),
                   "agrees_with_policy": agreement(t, policy_tokens)} for e, t in enumerate(after)],
    }
    result["served_by_engine"] = served_by  # per request, before then after: [0, 1, 0, 1] when the pins held
    result["routing_verified"] = served_by == [str(e) for e in range(ENGINES)] * 2
    result["every_engine_has_the_policy"] = all(r["agrees_with_policy"] == TOKENS for r in result["after"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0 if result["every_engine_has_the_policy"] and result["policy_differs_from_base"] else 1


if __name__ == "__main__":
    sys.exit(main())
