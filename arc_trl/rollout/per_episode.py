"""Per-episode scheduling: every episode advances on its own (`rollout_scheduling: per_episode`).

A turn goes to the sandbox as soon as its generation ends, and the episode's next turn re-enters the engine while
other episodes are still decoding, so nothing waits for the batch's longest turn or slowest code run (the
lock-step loop, `arc_trl.rollout.arc_rollout.run_episodes`, waits for both every turn). Generation goes through a
request stream (`arc_trl.rollout.streams`): a vLLM engine driven step by step in this thread, or concurrent requests
to a vLLM server. Sandbox turns run in worker threads (`SandboxPool.num_workers` at a time) while the engine steps.

The episodes are the lock-step loop's, token for token: the same turn logic (`arc_trl.rollout.turns`), prompt +
model tokens + environment tokens with nothing re-tokenized, `env_mask`, sampler log-probs, the per-turn cap and
the episode budget (each request's `max_tokens` is what is left of them), `on_finished` as episodes end, and every
sandbox session closed, also on errors. No collective call is made: each process drives its own requests, so
processes need not stay aligned (generators that need alignment fall back to lock-step, `per_episode_unsupported`).
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from arc_trl.chat_template import end_of_turn_id
from arc_trl.data.task import ArcTask
from arc_trl.rollout.episode import Episode
from arc_trl.rollout.settings import RolloutSettings
from arc_trl.rollout.streams import open_stream, stream_unsupported
from arc_trl.rollout.turns import (
    FinishedReporter,
    apply_model_turn,
    apply_program_result,
    apply_turn_result,
    close_sessions,
    open_episodes,
    open_sessions,
    turn_token_cap,
)
from arc_trl.config.warn_once import warn_once

logger = logging.getLogger(__name__)


def per_episode_unsupported(generator) -> str | None:
    """Why `generator` cannot schedule per episode (None when it can)."""
    return stream_unsupported(generator)


def warn_lockstep_fallback(reason: str) -> None:
    """Say once per reason that per-episode scheduling fell back to lock-step."""
    warn_once(logger, f"rollout_scheduling=per_episode falls back to lockstep: {reason}")


def run_per_episode(
    tasks: list[ArcTask],
    prompts: list[list[dict]],
    generator,
    tokenizer,
    pool,
    settings: RolloutSettings,
    template_kwargs: dict | None = None,
    on_finished: Callable[[list[Episode]], None] | None = None,
    max_active: int | None = None,
) -> list[Episode]:
    """Play one episode per (task, prompt) pair, each at its own pace; same contract as `run_episodes`.

    `max_active`: at most this many episodes in play at once (None: all). An episode starts (its sandbox session
    opens, its first turn joins the engine) as soon as another ends, so the engine keeps `max_active` episodes in
    flight without holding a sandbox process per episode of a long evaluation."""
    template_kwargs = template_kwargs or {}
    end_of_turn = end_of_turn_id(tokenizer, generator.eos_token_ids, **template_kwargs)  # fails before generating
    episodes = open_episodes(tasks, prompts, tokenizer, template_kwargs)
    report_finished = FinishedReporter(episodes, on_finished)
    eos = set(generator.eos_token_ids)
    program = settings.agent_mode == "program"
    limit = len(episodes) if max_active is None else max(1, max_active)
    results: queue.SimpleQueue = queue.SimpleQueue()  # (episode, result, error) from the sandbox threads
    executor = ThreadPoolExecutor(max(1, min(len(episodes), pool.num_workers)), thread_name_prefix="arc-episode-turn")
    in_sandbox = 0
    waiting = list(reversed(episodes))  # not started yet, next last
    playing: list[Episode] = []

    def run_code(ep: Episode) -> None:
        try:
            text = ep.assistant_texts[-1]
            results.put((ep, ep.session.run_program(text) if program else ep.session.run_turn(text), None))
        except BaseException as error:  # noqa: BLE001  re-raised in the scheduling thread
            results.put((ep, None, error))

    def start_more() -> None:
        """Close the sessions of the episodes that ended; start waiting ones in their place."""
        nonlocal playing
        ended = [ep for ep in playing if ep.done]
        if ended:
            close_sessions(ended, pool)
            playing = [ep for ep in playing if not ep.done]
        starting = [waiting.pop() for _ in range(min(len(waiting), limit - len(playing)))]
        if starting:
            open_sessions(starting, pool)  # started in the background while the engine works on the first turns
            for ep in starting:
                stream.add(ep.index, ep.prompt_ids, turn_token_cap(ep, settings))
            playing += starting

    stream = None
    try:
        stream = open_stream(generator)
        start_more()
        while stream.pending() or in_sandbox:
            if stream.pending():
                for key, ids, lps in stream.advance():
                    ep = episodes[key]
                    if apply_model_turn(ep, ids, lps, eos, tokenizer, settings):
                        in_sandbox += 1
                        executor.submit(run_code, ep)
            block = not stream.pending()  # nothing is generating: wait for a code run to finish
            while in_sandbox:
                try:
                    ep, result, error = results.get(block=block)
                except queue.Empty:
                    break
                block = False
                in_sandbox -= 1
                if error is not None:
                    raise error
                if program:
                    apply_program_result(ep, result)
                else:
                    apply_turn_result(ep, result, settings, tokenizer, template_kwargs, end_of_turn)
                    if not ep.done:
                        stream.add(ep.index, ep.prompt_ids + ep.completion_ids, turn_token_cap(ep, settings))
            report_finished()
            start_more()
        for ep in episodes:
            if not ep.done:
                ep.finish("max_turns")
        report_finished()
    finally:
        try:
            if stream is not None:
                stream.close()
        finally:
            executor.shutdown(wait=True, cancel_futures=True)  # no code run may still hold a session
            close_sessions(episodes, pool)
    return episodes
