"""Request streams: per-request generation against a continuously batching engine (per-episode scheduling).

A stream takes one request at a time (`add(key, token_ids, max_tokens)`) and hands back the requests that finished
(`advance()`), so an episode's next turn can join the running batch while other episodes are still decoding:

- `EngineStream`: an in-process `vllm.LLM` driven step by step (`LLMEngine.add_request` / `LLMEngine.step`, what
  `LLM.generate` does internally). Used for a standalone engine (`VLLMGenerator`) and TRL's colocated engine.
- `ServerStream`: concurrent single-prompt requests to a `trl vllm-serve` / `vllm serve` server through TRL's
  `VLLMClient` (its `/v1/completions` payload), each in its own thread. A server with several data-parallel engines
  gets each request pinned to one engine by its key (vLLM's `X-data-parallel-rank` header), so an episode's turns
  all land on the engine whose prefix cache holds its context (vLLM's own balancer ignores prefixes).

`run_turn(stream, sequences, max_tokens, keys)` drives a stream as one lock-step turn (all requests, then all
results, in order): the server path of the lock-step scheduler.

`open_stream(generator)` is a generator's own stream (`generator.open_stream()`); `stream_unsupported(generator)`
says why it has none (transformers `generate` has no continuous batching; a tensor-parallel colocated engine needs
identical requests on every rank of its group at every step). The generators (rollout/generators.py) build on this
module, never the reverse.
"""

from __future__ import annotations

import itertools
import math
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

from arc_trl.integrations.trl_internals import (engine_prompt, stream_clients, sync_weights_once_per_step,
                                                wake_for_stream)

Finished = tuple[int, list[int], list[float] | None]  # (key, new token ids, sampler logprobs or None)


class RequestStream(Protocol):
    def add(self, key: int, token_ids: list[int], max_tokens: int) -> None:
        """Start generating up to `max_tokens` new tokens after `token_ids`; `key` comes back with the result."""

    def pending(self) -> int:
        """Requests added and not yet returned by `advance`."""

    def advance(self) -> list[Finished]:
        """Make progress (one engine step, or a short wait for server replies); the requests that finished."""

    def close(self) -> None:
        """Abort what is still running and release the engine (idempotent)."""


class EngineStream:
    """Requests joining a `vllm.LLM`'s engine between its steps. Call it from one thread only."""

    def __init__(self, llm, sampling: dict[str, Any], on_close=None, request_seed=None) -> None:
        self.llm = llm
        self.request_seed = request_seed  # optional: token ids -> the request's sampling seed
        self.engine = llm.llm_engine
        self.sampling = sampling
        self.on_close = on_close
        self.running: dict[str, int] = {}  # request id -> key
        self._ids = (f"arc-{uuid.uuid4().hex[:8]}-{i}" for i in itertools.count())
        self.closed = False

    def add(self, key: int, token_ids: list[int], max_tokens: int) -> None:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        seed = {} if self.request_seed is None else {"seed": self.request_seed(token_ids)}
        params = SamplingParams(max_tokens=max_tokens, **self.sampling, **seed)
        params.output_kind = RequestOutputKind.FINAL_ONLY  # as LLM.generate: only the finished output comes back
        request_id = next(self._ids)
        self.engine.add_request(request_id, engine_prompt(self.llm, list(token_ids)), params)  # as LLM.generate
        self.running[request_id] = key

    def pending(self) -> int:
        return len(self.running)

    def advance(self) -> list[Finished]:
        finished = []
        for output in self.engine.step():
            key = self.running.get(output.request_id)
            if key is None or not output.finished:
                continue
            del self.running[output.request_id]
            sample = output.outputs[0]
            lps = sampled_logprobs(sample) if sample.logprobs is not None else None  # NaN where vLLM gave none
            finished.append((key, list(sample.token_ids), lps))
        return finished

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            if self.running:
                self.engine.abort_request(list(self.running))
                self.running.clear()
        finally:
            if self.on_close is not None:
                self.on_close()


class ServerStream:
    """Concurrent single-prompt requests to a vLLM server (TRL's `VLLMClient.generate`), one thread each.

    `clients`: one client per data-parallel engine of the server, each pinned to its engine (`stream_clients`); the
    request of `key` goes to engine `(key + offset) % len(clients)`, so the same key (an episode) always meets the
    same engine, and keys 0..n-1 spread evenly (`offset`: the trainer process's index, for odd counts)."""

    POLL_S = 0.005  # longest wait in `advance`, so sandbox results are picked up promptly

    def __init__(self, clients, sampling: dict[str, Any], max_concurrency: int = 256, offset: int = 0) -> None:
        self.clients = list(clients) if isinstance(clients, (list, tuple)) else [clients]
        self.offset = offset
        self.sampling = sampling
        self.executor = ThreadPoolExecutor(max_concurrency, thread_name_prefix="arc-vllm-request")
        self.running: dict[Future, int] = {}
        self.closed = False

    def engine_of(self, key: int) -> int:
        """The data-parallel engine that serves `key`'s requests."""
        return (key + self.offset) % len(self.clients)

    def add(self, key: int, token_ids: list[int], max_tokens: int) -> None:
        client = self.clients[self.engine_of(key)]
        future = self.executor.submit(client.generate, prompts=[list(token_ids)], max_tokens=max_tokens,
                                      **self.sampling)
        self.running[future] = key

    def pending(self) -> int:
        return len(self.running)

    def advance(self) -> list[Finished]:
        done, _ = wait(list(self.running), timeout=self.POLL_S, return_when=FIRST_COMPLETED)
        finished = []
        for future in done:
            key = self.running.pop(future)
            out = future.result()  # a failed request raises here, in the scheduling thread
            ids = list(out["completion_ids"][0])
            finished.append((key, ids, sampled_server_logprobs(out, ids)))
        return finished

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for future in self.running:
            future.cancel()
        self.running.clear()
        self.executor.shutdown(wait=False, cancel_futures=True)


# ----------------------------------------------------------------------------------------------------------------
# which stream for which generator


def sampled_server_logprobs(out: dict[str, Any], ids: list[int]) -> list[float] | None:
    """The sampled tokens' log-probs from `VLLMClient.generate`'s reply for one prompt (None when it has none). Each
    position lists log-probs sorted by value (`logprob_token_ids` beside them), the sampled token among them but not
    necessarily first: it is found by id. NaN where the server gave none (never 0.0: that claims certainty)."""
    lps = out.get("logprobs")
    if lps is None:
        return None
    token_ids = out.get("logprob_token_ids")
    values = []
    for i, (token, position) in enumerate(zip(ids, lps[0])):
        if token_ids:  # find the sampled token among the listed ones
            listed = token_ids[0][i]
            at = listed.index(token) if token in listed else None
        else:  # a reply without ids (logprobs=0): the one value given is the sampled token's
            at = 0
        value = position[at] if position and at is not None and at < len(position) else None
        values.append(math.nan if value is None else float(value))
    return values


def run_turn(stream: RequestStream, sequences: list[list[int]], max_tokens: int,
             keys: list[int] | None = None) -> tuple[list[list[int]], list[list[float]] | None]:
    """One lock-step turn through `stream`: every sequence continued by at most `max_tokens` tokens, results in the
    order of `sequences` (`keys`: their episodes' stable ids, default their positions); the stream is closed."""
    keys = list(range(len(sequences))) if keys is None else list(keys)
    if len(keys) != len(sequences) or len(set(keys)) != len(keys):
        raise ValueError(f"run_turn needs one distinct key per sequence, got {len(keys)} keys for {len(sequences)}")
    done: dict[int, tuple[list[int], list[float] | None]] = {}
    try:
        for key, sequence in zip(keys, sequences):
            stream.add(key, sequence, max_tokens)
        while stream.pending():
            for key, ids, lps in stream.advance():
                done[key] = (ids, lps)
    finally:
        stream.close()
    ids = [done[key][0] for key in keys]
    lps = [done[key][1] for key in keys]
    return ids, None if any(lp is None for lp in lps) else lps


def stream_unsupported(generator) -> str | None:
    """Why `generator` cannot run per-episode (None when it can): its own `stream_unsupported()` where it has one,
    else whether it has an `open_stream()`."""
    if hasattr(generator, "stream_unsupported"):
        return generator.stream_unsupported()
    if hasattr(generator, "open_stream"):
        return None
    return f"{type(generator).__name__} has no request stream"


def open_stream(generator) -> RequestStream:
    """The generator's request stream (`generator.open_stream()`)."""
    return generator.open_stream()


def sampled_logprobs(sample) -> list[float]:
    """The sampled tokens' log-probs from a vLLM `CompletionOutput`; NaN where vLLM gave none (never 0.0)."""
    positions = sample.logprobs or [None] * len(sample.token_ids)
    out = []
    for token_id, position in zip(sample.token_ids, positions):
        entry = position.get(token_id) if position else None
        out.append(math.nan if entry is None or entry.logprob is None else float(entry.logprob))
    return out


def trainer_sampling(vg) -> dict[str, Any]:
    """The sampling settings TRL's `VLLMGeneration.generate` uses (trl/generation/vllm_generation.py), read now so
    that temporary overrides (`generation_overrides`, the evaluation temperature) apply; `max_tokens` per request."""
    sampling = {
        "n": 1,
        "repetition_penalty": vg.repetition_penalty,
        "temperature": vg.temperature,
        "top_p": vg.top_p,
        "top_k": vg.top_k,
        "min_p": 0.0 if vg.min_p is None else vg.min_p,
        "logprobs": vg.logprobs,
    }
    return sampling


def trainer_stream(trainer) -> RequestStream:
    """A stream through the trainer's vLLM (its server, or its colocated engine), after TRL's weight sync."""
    vg = trainer.vllm_generation
    # The weight sync of GRPOTrainer._generate_single_turn (TRL's rollout_func path already did it this step; the
    # evaluation callback's path relies on this one). Collective, like the rollout: every process gets here.
    sync_weights_once_per_step(trainer)
    sampling = trainer_sampling(vg)
    if vg.mode == "server":
        return ServerStream(stream_clients(trainer), {**sampling, "generation_kwargs": vg.generation_kwargs},
                            offset=trainer.accelerator.process_index)
    # Colocated: the sleep-mode handling of VLLMGeneration.generate: re-push discarded weights, wake the KV cache,
    # and sleep again when the stream closes.
    sleep_again = wake_for_stream(vg)
    return EngineStream(vg.llm, {**sampling, **vg.generation_kwargs}, on_close=sleep_again)
