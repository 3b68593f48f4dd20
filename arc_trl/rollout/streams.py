"""Request streams: per-request generation against a continuously batching engine (per-episode scheduling).

A stream takes one request at a time (`add(key, token_ids, max_tokens)`) and hands back the requests that finished
(`advance()`), so an episode's next turn can join the running batch while other episodes are still decoding:

- `EngineStream`: an in-process `vllm.LLM` driven step by step (`LLMEngine.add_request` / `LLMEngine.step`, what
  `LLM.generate` does internally). Used for a standalone engine (`VLLMGenerator`) and TRL's colocated engine.
- `ServerStream`: concurrent single-prompt requests to a `trl vllm-serve` / `vllm serve` server through TRL's
  `VLLMClient` (its `/v1/completions` payload), each in its own thread.

`open_stream(generator)` picks the stream of a generator; `stream_unsupported(generator)` says why there is none
(transformers `generate` has no continuous batching; a tensor-parallel colocated engine needs identical requests on
every rank of its group at every step).
"""

from __future__ import annotations

import itertools
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

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


def sampled_logprobs(sample) -> list[float]:
    """The sampler's log-probability of each generated token of a vLLM `CompletionOutput` (requested with
    `logprobs=0`: each position holds the sampled token, plus possibly top-ranked ones)."""
    out = []
    for token, entry in zip(sample.token_ids, sample.logprobs or []):
        if not entry:
            out.append(0.0)
        else:
            out.append(entry[token].logprob if token in entry else next(iter(entry.values())).logprob)
    return out


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
        self.engine.add_request(request_id, self._engine_input(list(token_ids)), params)
        self.running[request_id] = key

    def _engine_input(self, token_ids: list[int]):
        # LLM.generate renders each prompt with `_preprocess_cmpl_one` before `add_request`; older/newer vLLMs
        # without it take the raw token prompt.
        prompt = {"prompt_token_ids": token_ids}
        render = getattr(self.llm, "_preprocess_cmpl_one", None)
        return render(prompt) if render is not None else prompt

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
            lps = sampled_logprobs(sample) if sample.logprobs is not None else None
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
    """Concurrent single-prompt requests to a vLLM server (TRL's `VLLMClient.generate`), one thread each."""

    POLL_S = 0.005  # longest wait in `advance`, so sandbox results are picked up promptly

    def __init__(self, client, sampling: dict[str, Any], max_concurrency: int = 256) -> None:
        self.client = client
        self.sampling = sampling
        self.executor = ThreadPoolExecutor(max_concurrency, thread_name_prefix="arc-vllm-request")
        self.running: dict[Future, int] = {}
        self.closed = False

    def add(self, key: int, token_ids: list[int], max_tokens: int) -> None:
        future = self.executor.submit(self.client.generate, prompts=[list(token_ids)], max_tokens=max_tokens,
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
            lps = out.get("logprobs")  # per token: top-ranked logprobs, the sampled token's first
            seq_lps = None if lps is None else [0.0 if not lp or lp[0] is None else float(lp[0]) for lp in lps[0]]
            finished.append((key, list(out["completion_ids"][0]), seq_lps))
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


def stream_unsupported(generator) -> str | None:
    """Why `generator` cannot run per-episode (None when it can)."""
    from arc_trl.rollout.generators import TrainerGenerator, TransformersGenerator, VLLMGenerator

    if isinstance(generator, VLLMGenerator):
        return None
    if isinstance(generator, TrainerGenerator):
        trainer = generator.trainer
        if not trainer.use_vllm:
            return ("the trainer generates with transformers `generate`, which has no continuous batching "
                    "(set use_vllm: true for per-episode scheduling)")
        vg = trainer.vllm_generation
        if vg.mode == "colocate" and vg.tensor_parallel_size > 1:
            return (f"colocated vLLM with vllm_tensor_parallel_size={vg.tensor_parallel_size} runs one engine across "
                    "the ranks of a tensor-parallel group, which must submit identical requests at every step")
        if getattr(vg, "structured_outputs_regex", None) is not None:
            return "vllm_structured_outputs_regex is not supported by per-episode scheduling"
        return None
    if isinstance(generator, TransformersGenerator):
        return "transformers `generate` has no continuous batching"
    if hasattr(generator, "open_stream"):
        return None
    return f"{type(generator).__name__} has no request stream"


def open_stream(generator) -> RequestStream:
    from arc_trl.rollout.generators import TrainerGenerator, VLLMGenerator

    if isinstance(generator, VLLMGenerator):
        return EngineStream(generator.llm, {"logprobs": 0, **generator.sampling},
                            request_seed=getattr(generator, "request_seed", None))
    if isinstance(generator, TrainerGenerator):
        return _trainer_stream(generator.trainer)
    return generator.open_stream()


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


def _trainer_stream(trainer) -> RequestStream:
    vg = trainer.vllm_generation
    # The weight sync of GRPOTrainer._generate_single_turn (TRL's rollout_func path already did it this step; the
    # evaluation callback's path relies on this one). Collective, like the rollout: every process gets here.
    if getattr(trainer, "_last_loaded_step", None) != trainer.state.global_step:
        vg.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step
    sampling = trainer_sampling(vg)
    if vg.mode == "server":
        return ServerStream(_server_client(trainer), {**sampling, "generation_kwargs": vg.generation_kwargs})
    # Colocated: the sleep-mode handling of VLLMGeneration.generate: re-push discarded weights, wake the KV cache,
    # and sleep again when the stream closes.
    on_close = None
    if vg.enable_sleep_mode:
        if vg._llm_weights_sleeping:
            vg.sync_weights()
        vg.llm.wake_up(tags=["kv_cache"])

        def on_close() -> None:
            vg.llm.sleep(level=2)
            vg._llm_weights_sleeping = True

    return EngineStream(vg.llm, {**sampling, **vg.generation_kwargs}, on_close=on_close)


def _server_client(trainer):
    """This process's own `VLLMClient` (TRL makes one on the main process only, for its collective generate and the
    weight sync); it only sends generation requests, kept on the trainer across rollouts."""
    client = getattr(trainer, "_arc_stream_client", None)
    if client is None:
        from requests.adapters import HTTPAdapter
        from trl.generation.vllm_client import VLLMClient

        vg = trainer.vllm_generation
        base_url = vg.server_base_url or f"http://{vg.server_host}:{vg.server_port}"
        client = VLLMClient(base_url=base_url, connection_timeout=vg.server_timeout)
        retries = client.session.adapters["http://"].max_retries
        for prefix in ("http://", "https://"):  # one pooled connection per concurrent request
            client.session.mount(prefix, HTTPAdapter(max_retries=retries, pool_maxsize=256))
        trainer._arc_stream_client = client
    return client
