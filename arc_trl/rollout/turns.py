"""The per-episode turn logic shared by both schedulers (`run_episodes` lock-step, `run_per_episode`).

One place decides what a finished model turn does to an episode (`apply_model_turn`) and one what a sandbox result
does (`apply_turn_result`, `apply_program_result`); the schedulers only decide *when* these run.
"""

from __future__ import annotations

from collections.abc import Callable

from arc_trl.chat_template import env_turn_ids, prompt_ids as render_prompt_ids
from arc_trl.data.task import ArcTask
from arc_trl.rollout.episode import Episode
from arc_trl.rollout.settings import RolloutSettings


def open_episodes(tasks: list[ArcTask], prompts: list[list[dict]], tokenizer, template_kwargs: dict) -> list[Episode]:
    """One episode per (task, prompt) pair, its prompt rendered by the chat template (no session yet)."""
    return [
        Episode(task=task, prompt_ids=render_prompt_ids(tokenizer, prompt, **template_kwargs), index=i)
        for i, (task, prompt) in enumerate(zip(tasks, prompts, strict=True))
    ]


def open_sessions(episodes: list[Episode], pool) -> None:
    """Give each episode its sandbox session; the processes start in the background (`SandboxPool.open_sessions`),
    while the first turn generates."""
    for ep, session in zip(episodes, pool.open_sessions([ep.task for ep in episodes]), strict=True):
        ep.session = session


def close_sessions(episodes: list[Episode], pool) -> None:
    """Hand the episodes' sessions to the pool to close in the background (off the step's critical path)."""
    sessions = [ep.session for ep in episodes if ep.session is not None]
    for ep in episodes:
        ep.session = None
    pool.close_sessions(sessions)


def turn_token_cap(ep: Episode, settings: RolloutSettings) -> int:
    """The most tokens the episode's next turn may have: the per-turn cap within what is left of the budget."""
    budget = settings.max_completion_length
    per_turn = settings.max_tokens_per_turn or budget
    return max(1, min(per_turn, budget - len(ep.completion_ids)))


def apply_model_turn(ep: Episode, ids: list[int], logprobs: list[float] | None, eos_token_ids: set[int],
                     tokenizer, settings: RolloutSettings) -> bool:
    """Append a generated turn (cut to the episode budget). True if it ended with an end-of-turn token, i.e. its code
    is to run next; otherwise the episode ends as truncated (cut by the per-turn cap or the episode budget)."""
    ids = list(ids[: settings.max_completion_length - len(ep.completion_ids)])
    lps = None if logprobs is None else logprobs[: len(ids)]
    ended = bool(ids) and ids[-1] in eos_token_ids
    text = tokenizer.decode(ids[:-1] if ended else ids, skip_special_tokens=False)
    ep.add_model_turn(ids, lps, text)
    if not ended:
        ep.finish("truncated")
    return ended


def apply_turn_result(ep: Episode, result, settings: RolloutSettings, tokenizer, template_kwargs: dict,
                      end_of_turn: int) -> None:
    """Record a REPL turn's sandbox result; end the episode (SUBMIT, last turn, budget) or append the reply.
    Before the reply, the turn's last token becomes the template's `end_of_turn` id (`Episode.end_turn_with`: a turn
    that stopped on a second EOS such as Qwen3's <|endoftext|> would otherwise break token = rendered text)."""
    _record_turn(ep, result)
    if result.submitted is not None:
        ep.finish("submitted")
    elif len(ep.turn_spans) >= settings.max_turns:
        ep.finish("max_turns")
    else:
        env_ids = env_turn_ids(tokenizer, result.observation, **template_kwargs)
        if len(ep.completion_ids) + len(env_ids) >= settings.max_completion_length:
            ep.finish("budget")  # counts as truncated (Episode.truncated)
        else:
            ep.end_turn_with(end_of_turn)
            ep.add_env_turn(env_ids, result.observation)
    if ep.done:  # the reply the model never sees: what the episode's last code printed (its records keep it)
        ep.final_observation = result.observation


def apply_program_result(ep: Episode, result) -> None:
    """Record a program-mode result; the episode ends."""
    _record_program(ep, result)
    ep.final_observation = program_observation(result)
    ep.finish("program")


def program_observation(result) -> str:
    """What a program-mode run printed and raised: its output, then each failing call's error, by input."""
    parts = [result.stdout.rstrip("\n")] if getattr(result, "stdout", "").strip() else []
    if getattr(result, "error", None):
        parts.append(result.error)
    for kind, errors in (("train", getattr(result, "train_errors", [])), ("test", getattr(result, "test_errors", []))):
        parts += [f"{kind} input {i}: {e}" for i, e in enumerate(errors) if e]
    return "\n".join(parts) if parts else "(no output)"


class FinishedReporter:
    """Calls `on_finished` once per episode, with the episodes that ended since the last call."""

    def __init__(self, episodes: list[Episode], on_finished: Callable[[list[Episode]], None] | None) -> None:
        self.episodes = episodes
        self.on_finished = on_finished
        self.reported: set[int] = set()

    def __call__(self) -> None:
        newly = [ep for ep in self.episodes if ep.done and ep.index not in self.reported]
        self.reported.update(ep.index for ep in newly)
        if newly and self.on_finished is not None:
            self.on_finished(newly)


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
    if result.transform is not None:  # check_transform: the turn's transform applied to the train inputs
        out.train_predictions = list(result.transform.train_outputs)
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
