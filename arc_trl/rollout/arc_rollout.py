"""The multi-turn REPL rollout: TRL's `rollout_func` for ARC.

Each turn, all active episodes of the batch generate together (one batched call), then their code runs in their
own sandbox sessions in parallel, and the environment's reply is appended as the next user message. The completion
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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from arc_trl.chat_template import end_of_turn_id, env_turn_ids, prompt_ids as render_prompt_ids
from arc_trl.data.dataset import task_from_json_string
from arc_trl.data.task import ArcTask
from arc_trl.rollout.episode import Episode
from arc_trl.rollout.generators import Generator, TrainerGenerator


@dataclass
class RolloutSettings:
    agent_mode: str = "repl"  # repl | program
    max_turns: int = 4
    max_tokens_per_turn: int | None = None
    max_completion_length: int = 1024  # episode budget: model + environment tokens


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
) -> list[Episode]:
    """Play one episode per (task, prompt) pair to the end and return them (sandbox sessions closed).

    `on_finished(episodes)` is called after each turn with the episodes that ended in it (e.g. to start teacher
    scoring of finished episodes while the others keep generating).
    """
    template_kwargs = template_kwargs or {}
    episodes = [
        Episode(task=task, prompt_ids=render_prompt_ids(tokenizer, prompt, **template_kwargs), index=i)
        for i, (task, prompt) in enumerate(zip(tasks, prompts, strict=True))
    ]
    reported: set[int] = set()

    def report_finished() -> None:
        newly = [ep for ep in episodes if ep.done and ep.index not in reported]
        reported.update(ep.index for ep in newly)
        if newly and on_finished is not None:
            on_finished(newly)

    budget = settings.max_completion_length
    per_turn = settings.max_tokens_per_turn or budget
    eos = set(generator.eos_token_ids)
    end_of_turn = end_of_turn_id(tokenizer, generator.eos_token_ids, **template_kwargs)
    try:
        for ep in episodes:
            ep.session = pool.new_session(ep.task)
        for turn in range(settings.max_turns):
            active = [ep for ep in episodes if not ep.done]
            if not generator.global_any(bool(active)):
                break
            # Generation is collective across processes; a process with nothing left joins with a dummy request.
            requests = [ep.prompt_ids + ep.completion_ids for ep in active] or [episodes[0].prompt_ids]
            cap = max(1, min(per_turn, max((budget - len(ep.completion_ids) for ep in active), default=1)))
            new_ids, new_lps = generator.generate(requests, cap)
            ran = []
            for i, ep in enumerate(active):
                ids = new_ids[i][: budget - len(ep.completion_ids)]
                lps = None if new_lps is None else new_lps[i][: len(ids)]
                ended = bool(ids) and ids[-1] in eos
                text = tokenizer.decode(ids[:-1] if ended else ids, skip_special_tokens=False)
                ep.add_model_turn(ids, lps, text)
                if not ended:
                    ep.finish("truncated")  # cut by the per-turn cap or the episode budget
                else:
                    ran.append(ep)
            if not ran:
                report_finished()
                continue
            if settings.agent_mode == "program":
                for ep, result in zip(ran, pool.map_programs([(ep.session, ep.assistant_texts[-1]) for ep in ran])):
                    _record_program(ep, result)
                    ep.finish("program")
                report_finished()
                continue
            results = pool.map_turns([(ep.session, ep.assistant_texts[-1]) for ep in ran])
            for ep, result in zip(ran, results):
                _record_turn(ep, result)
                if result.submitted is not None:
                    ep.finish("submitted")
                elif turn == settings.max_turns - 1:
                    ep.finish("max_turns")
                else:
                    env_ids = env_turn_ids(tokenizer, result.observation, **template_kwargs)
                    if len(ep.completion_ids) + len(env_ids) >= budget:
                        ep.finish("budget")  # counts as truncated (Episode.truncated)
                    else:
                        ep.end_turn_with(end_of_turn)
                        ep.add_env_turn(env_ids, result.observation)
            report_finished()
        for ep in episodes:
            if not ep.done:
                ep.finish("max_turns")
        report_finished()
    finally:
        for ep in episodes:
            if ep.session is not None:
                ep.session.close()
                ep.session = None
    return episodes


def _record_turn(ep: Episode, result) -> None:
    out = ep.outcome
    out.code_found |= bool(result.code_found)
    out.code_parsed |= bool(result.code_parsed)
    for r in result.results:
        out.num_code_runs += 1
        if r.status != "ok":
            out.num_errors += 1
            out.error_kind = r.error_kind or r.status
        if r.status == "timeout":
            out.num_timeouts += 1
    if result.submitted is not None:
        out.submitted = True
        out.test_predictions = [list(map(list, g)) for g in result.submitted]


def _record_program(ep: Episode, result) -> None:
    out = ep.outcome
    out.code_found = bool(result.code_found) if hasattr(result, "code_found") else bool(result.compiled)
    out.code_parsed = bool(result.compiled)
    out.num_code_runs += 1
    out.train_predictions = list(result.train_outputs) if result.compiled else None
    out.test_predictions = list(result.test_outputs) if result.compiled else None
    errors = [e for e in (result.errors or []) if e]
    if errors or not result.compiled:
        out.num_errors += 1
        out.error_kind = "exception"
    if any("timeout" in str(e).lower() for e in errors):
        out.num_timeouts += 1
        out.error_kind = "timeout"


class ArcRollout:
    """TRL `rollout_func(prompts, trainer)` playing ARC REPL (or program-mode) episodes.

    The dataset rows behind `prompts` are read from `trainer._rollout_inputs` (set by `ArcGRPOTrainer` just before
    generation), because TRL passes only the prompts; their `task_json` column gives the task the sandbox loads.
    """

    def __init__(self, pool, settings: RolloutSettings) -> None:
        self.pool = pool
        self.settings = settings
        self.last_episodes: list[Episode] = []
        self.on_finished: Callable[[list[Episode]], None] | None = None  # set by the trainer (teacher overlap)

    def __call__(self, prompts: list, trainer) -> dict[str, Any]:
        rows = trainer._rollout_inputs
        if rows is None or len(rows) != len(prompts):
            raise RuntimeError("ArcRollout must be used through ArcGRPOTrainer (it needs the dataset rows)")
        tasks = [task_from_row(row) for row in rows]
        episodes = run_episodes(
            tasks,
            prompts,
            TrainerGenerator(trainer),
            trainer.processing_class,
            self.pool,
            self.settings,
            trainer.chat_template_kwargs,
            on_finished=self.on_finished,
        )
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
