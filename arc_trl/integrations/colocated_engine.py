"""What arc-trl adds to the colocated `vllm.LLM` that TRL builds (`trl_internals.colocated_engine_kwargs`): the FP8
rollout settings (`fp8_rollout`), a fixed KV cache size (`vllm_kv_cache_memory_gib`) and a rendezvous port
of its own (`claim_rendezvous_port`).

A fixed size skips vLLM's start-up memory profiling, which compares the GPU's free memory before and after a dummy
forward and fails ("Error in memory profiling ... other processes ... release GPU memory") when another process on the
GPU frees memory in between: e.g. a second colocated run beside it, whose engine sleeps and wakes every step (vLLM 0.26,
`gpu_worker.determine_available_memory`; seen on an H200 with two SmolLM2 runs a GPU, docs/fp8.md). Without it vLLM
sizes the cache from `vllm_gpu_memory_utilization` less what its profile saw, a neighbour's growth included.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from arc_trl.integrations.fp8_rollout import engine_kwargs

GIB = 2**30


def kv_cache_memory_kwargs(gib: float | None) -> dict[str, int]:
    """vLLM's `kv_cache_memory_bytes` for `gib` GiB (empty for None: vLLM profiles and sizes it itself)."""
    if gib is None:
        return {}
    if not gib > 0:
        raise ValueError(f"vllm_kv_cache_memory_gib must be > 0 (or null: vLLM sizes the cache), got {gib}")
    return {"kv_cache_memory_bytes": int(gib * GIB)}


def colocated_engine_extra(colocated: bool, rollout_dtype: str, kv_cache_dtype: str,
                           kv_cache_memory_gib: float | None) -> dict[str, Any]:
    """The keyword arguments for a colocated engine (none for a server: its command line carries its settings)."""
    if not colocated:
        return {}
    return {**engine_kwargs(rollout_dtype, kv_cache_dtype), **kv_cache_memory_kwargs(kv_cache_memory_gib)}


_held: socket.socket | None = None  # the claimed port's socket, bound until the store has bound the port itself


def claim_rendezvous_port() -> int | None:
    """Give a single-process run without MASTER_PORT an OS-assigned free port for the torch.distributed store that
    TRL's colocated engine opens, and hold it until `release_rendezvous_port`; the port, or None where MASTER_PORT is
    set or several processes run (their launcher's rendezvous). TRL (`trl.trainer.utils.ensure_master_addr_port`) takes
    the first *free* of 29500, 23456, ... instead: a test then a bind, so runs started together on one machine test the
    same candidate free, take it, and all but one of them die with EADDRINUSE (seen on 29500 and 12355: 7 of 12
    SmolLM2 runs started together on an H200, 2026-11-28). The kernel picks an ephemeral port at random and never one
    that is bound; the claimed port stays bound (SO_REUSEADDR, not listening) until the store has bound it too (torch's
    store sets SO_REUSEADDR, so it may): a port closed at once would be free for another run's draw, or for any
    outgoing connection, before this run's store took it. MASTER_PORT 0 or auto (TRL: "pick one") is taken as
    unset."""
    global _held
    if os.environ.get("MASTER_PORT", "").strip().lower() not in ("", "0", "auto"):  # TRL's "pick one" values
        return None
    try:
        if int(os.environ.get("WORLD_SIZE") or 1) > 1:
            return None
    except ValueError:
        return None  # not ours to judge: TRL and torch report it
    release_rendezvous_port()
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("", 0))
    _held = held
    port = held.getsockname()[1]
    os.environ["MASTER_PORT"] = str(port)
    return port


@contextmanager
def rendezvous_port_held() -> Iterator[None]:
    """Within: the claimed port stays held; after (the engine built, or its build failed): released."""
    try:
        yield
    finally:
        release_rendezvous_port()


def release_rendezvous_port() -> None:
    """Close the claimed port's socket (once the engine's store is bound; idempotent)."""
    global _held
    if _held is not None:
        _held.close()
        _held = None
