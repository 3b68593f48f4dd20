"""A generator for a rollout played off the training thread (`async_rollouts: 1`, `arc_trl.trainer.async_rollout`).

The rollout of the next step plays on a background thread while this step trains, so it must make no collective call
(the training thread's collectives would interleave with them) and push no weights (the push belongs to the step
boundary, between rollouts). `DetachedServerGenerator` is `TrainerGenerator`'s vLLM-server path without either:

- each process sends its own single-prompt requests through its own clients (`trl_internals.stream_clients`, built
  on the training thread), one `ServerStream` per turn (lock-step) or per rollout (per-episode scheduling), each
  episode pinned to one data-parallel engine by its key, as in `TrainerGenerator`;
- `global_any` is this process's own flag: with per-request generation a process that has finished its episodes has
  nothing to join (the synchronous path's collective is the weight sync of `TrainerGenerator.generate`);
- the sampling settings are read once, when the generator is built on the training thread, so that a later change
  (the evaluation's temperature) cannot reach a rollout in flight;
- `cancel` (a `threading.Event`) ends the rollout at its next request or poll with `RolloutCancelled` (a rollback or
  the end of training discards it); the episode loops close their streams and sandbox sessions on the way out, and
  closing a stream waits for the requests it had sent (at most one turn each), so that a discarded rollout has
  nothing left on the server when the next weight push comes.
"""

from __future__ import annotations

import threading
from typing import Any

from arc_trl.rollout.generators import full_turn_kwargs
from arc_trl.rollout.streams import ServerStream, run_turn, trainer_sampling
from arc_trl.integrations.trl_internals import stream_clients


class RolloutCancelled(Exception):
    """A background rollout was discarded while it played."""


class DetachedServerGenerator:
    """Per-request generation against the trainer's vLLM server: no collective call, no weight push."""

    def __init__(self, trainer, cancel: threading.Event) -> None:
        vg = trainer.vllm_generation
        if not trainer.use_vllm or vg.mode != "server":
            raise ValueError("a detached rollout needs use_vllm: true and vllm_mode: server")
        self.eos_token_ids = list(trainer.eos_token_ids)
        self.cancel = cancel
        self.clients = stream_clients(trainer)
        self.offset = trainer.accelerator.process_index
        self.sampling: dict[str, Any] = {**trainer_sampling(vg), "generation_kwargs": dict(vg.generation_kwargs or {})}
        arc = getattr(trainer, "arc_config", None)
        self.full_turn_end = trainer.end_of_turn if arc is not None and arc.benchmark_full_turns else None

    def _check(self) -> None:
        if self.cancel.is_set():
            raise RolloutCancelled("the background rollout was discarded")

    def open_stream(self, generation_kwargs: dict | None = None) -> _CancellableStream:
        """A request stream to the server (per-episode scheduling opens one per rollout)."""
        self._check()
        sampling = self.sampling
        if generation_kwargs:
            sampling = {**sampling, "generation_kwargs": {**sampling["generation_kwargs"], **generation_kwargs}}
        return _CancellableStream(ServerStream(self.clients, sampling, offset=self.offset), self._check)

    def generate(self, sequences, max_tokens, keys=None):
        keys = list(range(len(sequences))) if keys is None else keys
        if not keys:  # nothing left on this process, and no collective to join
            return [], []
        extra = None if self.full_turn_end is None else full_turn_kwargs(max_tokens, self.full_turn_end)
        return run_turn(self.open_stream(extra), sequences[: len(keys)], max_tokens, keys)

    def global_any(self, flag: bool) -> bool:
        return flag


class _CancellableStream:
    """A `RequestStream` that raises `RolloutCancelled` at its next `add` or `advance` once cancelled."""

    def __init__(self, stream: ServerStream, check) -> None:
        self.stream, self.check = stream, check

    def add(self, key: int, token_ids: list[int], max_tokens: int) -> None:
        self.check()
        self.stream.add(key, token_ids, max_tokens)

    def pending(self) -> int:
        return self.stream.pending()

    def advance(self):
        self.check()
        return self.stream.advance()

    def close(self) -> None:
        self.stream.close()
        self.stream.executor.shutdown(wait=True)  # requests sent already end first: the server is idle afterwards
