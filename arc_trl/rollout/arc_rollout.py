"""The multi-turn REPL rollout: TRL's `rollout_func` for ARC.

Lock-step scheduling (`run_episodes` below): each turn, all active episodes of the batch generate together (one
batched call), then their code runs in their own sandbox sessions in parallel, and the environment's reply is
appended as the next user message. Per-episode scheduling (`arc_trl.rollout.per_episode`) lets each episode advance
on its own against a continuously batching engine; both share the turn logic of `arc_trl.rollout.turns`. The completion
is the concatenation of model tokens and environment tokens; `env_mask` is 0 on environment tokens so they never
enter the loss, and `logprobs` carries the sampler's log-probabilities of model tokens. Nothing is re-tokenized
between turns: the environment reply's tokens come from the chat template (`arc_trl.chat_template.env_turn_ids`).

An episode ends on a valid SUBMIT, after `max_turns` assistant turns, when the token budget
(`max_completion_length`, model + environment tokens) has no room for the environment's reply ("budget"), or when a
turn is cut by the per-turn cap or the budget ("truncated": a turn without end-of-turn token ends the episode). Both
"budget" and "truncated" episodes count as truncated (`Episode.truncated`).

A turn ends on any of the generator's EOS ids (TRL's `eos_token_ids`, e.g. Qwen3's `<|im_end|>` and
`<|endoftext|>`); before an environment reply is appended, a turn that stopped on another EOS than the template's
end-of-turn token gets that token instead (`Episode.end_turn_with`), so the tokens stay the rendered conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from arc_trl.chat_template import end_of_turn_id
from arc_trl.data.dataset import task_from_json_string
from arc_trl.data.task import ArcTask
from arc_trl.rollout.episode import Episode
from arc_trl.rollout.generators import Generator, TrainerGenerator
from arc_trl.rollout.per_episode import per_episode_unsupported, run_per_episode, warn_lockstep_fallback
from arc_trl.rollout.turns import (
    FinishedReporter,
    apply_model_turn,
    apply_program_result,
    apply_turn_result,
    close_sessions,
    open_episodes,
    open_sessions,
)
from arc_trl.rollout.settings import RolloutSettings
from arc_trl.integrations.trl_internals import engine_awake


def task_from_row(row: dict[str, Any]) -> ArcTask:
    """The task of a dataset row (column `task_json`, written by `arc_trl.data.dataset.build_dataset`)."""
    if "task_json" not in row:
        raise KeyError("dataset rows need a 'task_json' column (build the dataset with arc_trl.data.build_dataset)")
    return task_from_json_string(row["task_json"], row.get("task_id", "task"))


def run_episodes(
    tasks: list[ArcTask],
    prompts: list[list[dict]],
    generator: Generator,
    tokenizer,
    pool,
    settings: RolloutSettings,
    template_kwargs: dict | None = None,
    on_finished: Callable[[list[Episode]], None] | None = None,
    max_active: int | None = None,
) -> list[Episode]:
    """Play one episode per (task, prompt) pair to the end and return them (sandbox sessions closed).

    `on_finished(episodes)` is called with the episodes that ended since the last call (e.g. to start teacher
    scoring of finished episodes while the others keep generating). `settings.scheduling` picks the scheduler:
    `per_episode` (`arc_trl.rollout.per_episode`, at most `max_active` episodes in play at once) where the generator
    supports it, else lock-step (below; all episodes together: callers bound the batch).
    """
    template_kwargs = template_kwargs or {}
    if settings.scheduling == "per_episode":
        reason = per_episode_unsupported(generator)
        if reason is None:
            return run_per_episode(tasks, prompts, generator, tokenizer, pool, settings, template_kwargs, on_finished,
                                   max_active)
        warn_lockstep_fallback(reason)
    episodes = open_episodes(tasks, prompts, tokenizer, template_kwargs)
    report_finished = FinishedReporter(episodes, on_finished)
    budget = settings.max_completion_length
    per_turn = settings.max_tokens_per_turn or budget
    eos = set(generator.eos_token_ids)
    end_of_turn = end_of_turn_id(tokenizer, generator.eos_token_ids, **template_kwargs)
    try:
        open_sessions(episodes, pool)  # started in the background while the first turn generates
        for _turn in range(settings.max_turns):
            active = [ep for ep in episodes if not ep.done]
            if not generator.global_any(bool(active)):
                break
            # Generation is collective across processes; a process with nothing left joins with a dummy request.
            requests = [ep.prompt_ids + ep.completion_ids for ep in active] or [episodes[0].prompt_ids]
            cap = max(1, min(per_turn, max((budget - len(ep.completion_ids) for ep in active), default=1)))
            new_ids, new_lps = generator.generate(requests, cap, keys=[ep.index for ep in active])
            ran = [ep for i, ep in enumerate(active)
                   if apply_model_turn(ep, new_ids[i], None if new_lps is None else new_lps[i], eos, tokenizer,
                                       settings)]
            if not ran:
                report_finished()
                continue
            if settings.agent_mode == "program":
                for ep, result in zip(ran, pool.map_programs([(ep.session, ep.assistant_texts[-1]) for ep in ran])):
                    apply_program_result(ep, result)
                report_finished()
                continue
            results = pool.map_turns([(ep.session, ep.assistant_texts[-1]) for ep in ran])
            for ep, result in zip(ran, results):
                apply_turn_result(ep, result, settings, tokenizer, template_kwargs, end_of_turn)
            report_finished()
        for ep in episodes:
            if not ep.done:
                ep.finish("max_turns")
        report_finished()
    finally:
        close_sessions(episodes, pool)
    return episodes


class ArcRollout:
    """TRL `rollout_func(prompts, trainer)` playing ARC REPL (or program-mode) episodes.

    TRL passes only the prompts; the dataset rows behind them (their `task_json` column gives the task the sandbox
    loads) are handed over by `ArcGRPOTrainer` for the batch's generation, `with rollout.rows_for(inputs):`. With
    `async_rollouts`, the episodes of those rows may have been played already, in the background (`play` with a
    detached generator, `arc_trl.trainer.async_rollout`): `with rollout.played(episodes):` hands them over instead.
    """

    def __init__(self, pool, settings: RolloutSettings) -> None:
        self.pool = pool
        self.settings = settings
        self.rows: list[dict[str, Any]] | None = None  # the current batch's dataset rows (rows_for)
        self.ready: list[Episode] | None = None  # the rows' episodes, played already (played)
        self.last_episodes: list[Episode] = []
        self.on_finished: Callable[[list[Episode]], None] | None = None  # set by the trainer (teacher overlap)

    @contextmanager
    def rows_for(self, rows: list[dict[str, Any]]) -> Iterator[None]:
        """The dataset rows behind the prompts TRL passes while this block runs."""
        self.rows = rows
        try:
            yield
        finally:
            self.rows = None

    @contextmanager
    def played(self, episodes: list[Episode] | None) -> Iterator[None]:
        """Within: the rows' episodes are `episodes`, played already (None: play them when TRL asks)."""
        self.ready = episodes
        try:
            yield
        finally:
            self.ready = None

    def play(self, rows: list[dict[str, Any]], prompts: list, trainer, generator: Generator, pool,
             on_finished: Callable[[list[Episode]], None] | None = None) -> list[Episode]:
        """The episodes of `rows` (their prompts `prompts`) through `generator` and `pool`."""
        return run_episodes([task_from_row(row) for row in rows], prompts, generator, trainer.processing_class, pool,
                            self.settings, trainer.chat_template_kwargs, on_finished=on_finished)

    def __call__(self, prompts: list, trainer) -> dict[str, Any]:
        rows = self.rows
        if rows is None or len(rows) != len(prompts):
            raise RuntimeError("ArcRollout must be used through ArcGRPOTrainer (it needs the dataset rows)")
        episodes = self.ready
        if episodes is None:
            with engine_awake(trainer):  # a sleep-mode engine: one weight push and one sleep per rollout, not per turn
                episodes = self.play(rows, prompts, trainer, TrainerGenerator(trainer), self.pool, self.on_finished)
            for ep in episodes:
                ep.policy_version = trainer.state.global_step
        elif len(episodes) != len(prompts):
            raise RuntimeError(f"{len(episodes)} episodes handed over for {len(prompts)} prompts")
        self.last_episodes = episodes
        logprobs = None if any(ep.logprobs is None for ep in episodes) else [ep.logprobs for ep in episodes]
        return {
            "prompt_ids": [ep.prompt_ids for ep in episodes],
            "completion_ids": [ep.completion_ids for ep in episodes],
            "logprobs": logprobs,
            "env_mask": [ep.env_mask for ep in episodes],
            "outcome": [ep.outcome.to_dict() for ep in episodes],
            "finish_reason": [ep.finish_reason for ep in episodes],
        }
