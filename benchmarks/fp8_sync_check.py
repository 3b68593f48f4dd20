"""GPU check of FP8 rollouts' weight sync (docs/fp8.md): after optimizer steps that change the policy, a colocated FP8
engine synced by TRL's `VLLMGeneration.sync_weights` with arc_trl's re-quantizing hook holds exactly the FP8 linear
layers an FP8 engine built from the new weights holds (each still FP8, its scale and FP8 bytes bit for bit), and gives
its greedy tokens; beside it, a bf16 engine of the new weights (the FP8 gap itself). The CPU test of the same
(tests/integration/test_fp8_sync.py) replaces vLLM's FP8 quantization kernel by torch; this runs vLLM's own kernels.

    python benchmarks/fp8_sync_check.py --out OUT/fp8_sync_check.json [--shape qwen3-0.6b] [--kv-cache-dtype fp8]
        [--server]

Writes a JSON: tokens and log-probs of each engine on the taught prompt and on an untaught one (the model's uncertain
guesses, where FP8 rounding shows), the largest log-prob differences, the FP8 layers' problems against the fresh
engine, and `passed`: the synced engine's FP8 layers are the fresh engine's (`layer_problems` empty), its tokens the
fresh ones on both prompts, its untaught log-probs within --tolerance of the fresh FP8 engine's; the weights did move
(the fresh tokens are the taught ones, the stale ones differ); and the check can fail (`discriminates`: the fresh FP8
and bf16 engines differ by more than --tolerance on the untaught prompt, and the bf16 engine fails the layer check).
Exit code 1 when not passed. `--server`: the server's path of a push (`trl vllm-serve`'s NCCL weight-transfer
engine's start / finish around the loads, the broadcast left out) instead of the colocated sync. `--no-hook` runs
TRL's plain colocated sync (expected to fail: records the error). The engines, the prompts, the training, the syncs
and the layer check: benchmarks/fp8_sync_engine.py, as in the CPU test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process, as TRL's colocated one
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fp8_sync_engine as fp8_sync_check  # beside this script
from fp8_sync_engine import (
    PROMPT,
    TARGET,
    UNTAUGHT,
    fp8_layer_problems,
    fp8_layers,
    other_params,
    param_problems,
    server_sync,
    sync,
    train_towards_target,
)


def engine(model_dir: Path, rollout_dtype: str, kv_cache_dtype: str, memory: float):
    return fp8_sync_check.engine(model_dir, rollout_dtype, kv_cache_dtype, max_num_seqs=4,
                                 gpu_memory_utilization=memory)


def greedy(llm) -> dict:
    tokens, logps = fp8_sync_check.greedy(llm)
    untaught_tokens, untaught_logps = fp8_sync_check.greedy(llm, UNTAUGHT)
    return {"tokens": tokens, "logps": logps, "untaught_tokens": untaught_tokens, "untaught_logps": untaught_logps}


def shutdown(llm) -> None:
    import gc

    import torch

    core = getattr(llm.llm_engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()
    del llm
    gc.collect()
    torch.cuda.empty_cache()


def largest_difference(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--shape", default="qwen3-0.6b", help="arc_trl.models.tiny_model shape, random init")
    parser.add_argument("--kv-cache-dtype", default="auto", choices=("auto", "fp8"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--tolerance", type=float, default=1e-5,
                        help="largest |log-prob difference| on the untaught prompt between the synced and the fresh "
                             "FP8 engine (the same weights and kernels: only reduction-order noise); the check passes "
                             "only when the FP8/bf16 gap there is larger")
    parser.add_argument("--no-hook", action="store_true", help="TRL's plain sync (expected to fail)")
    parser.add_argument("--server", action="store_true", help="the server's path of a push, not the colocated sync")
    parser.add_argument("--memory", type=float, default=0.25, help="gpu_memory_utilization of each engine")
    args = parser.parse_args()
    import torch
    import vllm

    from arc_trl.models.tiny_model import build_tiny_model, shape_spec

    record: dict = {"shape": args.shape, "kv_cache_dtype": args.kv_cache_dtype, "hook": not args.no_hook,
                    "path": "server" if args.server else "colocated", "untaught_prompt": UNTAUGHT,
                    "vllm": vllm.__version__, "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                    "prompt": PROMPT, "target": TARGET, "steps": args.steps, "lr": args.lr}
    with tempfile.TemporaryDirectory() as tmp:
        base = build_tiny_model(Path(tmp) / "base", shape_spec(args.shape), device="cuda")
        llm = engine(base, "fp8", args.kv_cache_dtype, args.memory)
        record["stale"] = greedy(llm)
        stale_layers = fp8_layers(llm)
        trained = train_towards_target(base, args.steps, args.lr, device="cuda")
        trained.save_pretrained(Path(tmp) / "trained")
        started = time.perf_counter()
        try:
            server_sync(llm, trained) if args.server else sync(llm, trained, hook=not args.no_hook)
            record["sync_s"] = round(time.perf_counter() - started, 3)
            record["synced"] = greedy(llm)
            synced_layers, synced_params = fp8_layers(llm), other_params(llm)
        except Exception as error:  # noqa: BLE001 - the plain sync's failure is the finding of --no-hook
            record["sync_error"] = repr(error)[:2000]
        shutdown(llm)
        llm = None  # the stale engine's memory freed before two fresh engines are built (`del` in shutdown drops
        del trained  # only its own name)
        layers = {}
        for name, dtype in (("fresh_fp8", "fp8"), ("fresh_bf16", "bf16")):
            fresh = engine(Path(tmp) / "trained", dtype, args.kv_cache_dtype if dtype == "fp8" else "auto",
                           args.memory)
            record[name] = greedy(fresh)
            layers[name] = fp8_layers(fresh)
            if name == "fresh_fp8":
                fresh_params = other_params(fresh)
            shutdown(fresh)
            fresh = None
    fresh, synced, bf16 = record["fresh_fp8"], record.get("synced"), record["fresh_bf16"]
    record["premise_weights_moved"] = fresh["tokens"] == TARGET and record["stale"]["tokens"] != fresh["tokens"]
    record["fresh_fp8_layers"] = len(layers["fresh_fp8"])
    record["stale_layer_problems"] = len(fp8_layer_problems(stale_layers, layers["fresh_fp8"]))
    record["bf16_layer_problems"] = len(fp8_layer_problems(layers["fresh_bf16"], layers["fresh_fp8"]))
    if synced is not None:
        record["layer_problems"] = fp8_layer_problems(synced_layers, layers["fresh_fp8"])[:20]
        # a diagnosis, not a verdict: the other weights (embeddings, norms, lm_head) against the fresh engine's
        record["other_param_problems"] = param_problems(synced_params, fresh_params)[:20]
        record["synced_vs_fresh_fp8_max_abs_logp"] = largest_difference(synced["logps"], fresh["logps"])
        record["synced_vs_fresh_fp8_untaught_max_abs_logp"] = largest_difference(synced["untaught_logps"],
                                                                                 fresh["untaught_logps"])
    record["fresh_fp8_vs_bf16_max_abs_logp"] = largest_difference(fresh["logps"], bf16["logps"])
    record["fresh_fp8_vs_bf16_untaught_max_abs_logp"] = largest_difference(fresh["untaught_logps"],
                                                                           bf16["untaught_logps"])
    record["discriminates"] = bool(record["fresh_fp8_vs_bf16_untaught_max_abs_logp"] > args.tolerance
                                   and record["bf16_layer_problems"] > 0 and record["stale_layer_problems"] > 0)
    record["passed"] = bool(synced is not None and record["premise_weights_moved"] and record["discriminates"]
                            and not record["layer_problems"] and synced["tokens"] == fresh["tokens"]
                            and synced["untaught_tokens"] == fresh["untaught_tokens"]
                            and record["synced_vs_fresh_fp8_untaught_max_abs_logp"] <= args.tolerance)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1))
    counts = {f"n_{k}": len(record[k]) for k in ("layer_problems", "other_param_problems") if k in record}
    print(json.dumps({**{k: v for k, v in record.items() if not isinstance(v, (dict, list))}, **counts}, indent=1))
    return 0 if record["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
