"""Token-level record of one REPL episode: prompt, then model and environment tokens, never re-tokenized."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arc_trl.data.task import ArcTask
from arc_trl.rewards.outcome import AttemptOutcome


# Endings where the episode was cut by a token limit rather than ended by the model or the environment: "truncated"
# (a turn cut by the per-turn cap or the episode budget, no end-of-turn token) and "budget" (the turn ended, but the
# environment's reply does not fit in max_completion_length). TRL's `mask_truncated_completions` sees only the
# first kind (it checks the last token for EOS), so the trainer applies `Episode.truncated` itself.
TRUNCATED_ENDINGS = frozenset({"truncated", "budget"})


@dataclass
class Episode:
    """One rollout. `completion_ids` interleaves model turns (env_mask 1) and environment replies (env_mask 0).

    `logprobs` holds the sampler's log-probability for model tokens and 0.0 for environment tokens (which never enter
    the loss). `turn_spans` records the [start, end) of each model turn inside `completion_ids`.
    """

    task: ArcTask
    prompt_ids: list[int]
    index: int = 0  # position in the rollout batch
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    assistant_texts: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    outcome: AttemptOutcome = field(default_factory=AttemptOutcome)
    session: Any = None
    done: bool = False
    finish_reason: str = ""
    policy_version: int | None = None  # the optimizer step whose weights sampled it (the trainer's global step)
    # the sandbox's reply to the turn that ended the episode (SUBMIT, last turn, budget; program mode: the program's
    # output and errors): never sent to the model, so not in `observations`, but what its last code printed
    final_observation: str | None = None

    @property
    def num_model_tokens(self) -> int:
        return sum(self.env_mask)

    @property
    def truncated(self) -> bool:
        """Cut by a token limit (`TRUNCATED_ENDINGS`), whatever its last token is."""
        return self.finish_reason in TRUNCATED_ENDINGS

    def add_model_turn(self, token_ids: list[int], logprobs: list[float] | None, text: str) -> None:
        start = len(self.completion_ids)
        self.completion_ids.extend(token_ids)
        self.env_mask.extend([1] * len(token_ids))
        if logprobs is None or self.logprobs is None:
            self.logprobs = None  # one backend without logprobs makes the whole episode logprob-less
        else:
            self.logprobs.extend(float(lp) for lp in logprobs)
        self.turn_spans.append((start, len(self.completion_ids)))
        self.assistant_texts.append(text)
        self.outcome.num_turns += 1

    def end_turn_with(self, token_id: int) -> None:
        """Make the last model turn end with the chat template's end-of-turn token before an environment reply.

        A turn can stop on another EOS token (Qwen3's generation config also lists `<|endoftext|>`); followed by
        the reply's tokens it would leave a token stream that is not the rendered conversation. That last token is
        replaced by `token_id` and becomes an environment token (env_mask 0, logprob 0.0: the model did not sample
        it, so it is not trained on); the turn's span shrinks by one."""
        if self.completion_ids[-1] == token_id:
            return
        self.completion_ids[-1] = token_id
        self.env_mask[-1] = 0
        if self.logprobs is not None:
            self.logprobs[-1] = 0.0
        start, end = self.turn_spans[-1]
        self.turn_spans[-1] = (start, end - 1)

    def add_env_turn(self, token_ids: list[int], observation: str) -> None:
        self.completion_ids.extend(token_ids)
        self.env_mask.extend([0] * len(token_ids))
        if self.logprobs is not None:
            self.logprobs.extend([0.0] * len(token_ids))
        self.observations.append(observation)

    def finish(self, reason: str) -> None:
        self.done = True
        self.finish_reason = reason

    def messages(self) -> list[dict[str, str]]:
        """The conversation after the prompt, as chat messages (assistant turns and environment replies)."""
        out: list[dict[str, str]] = []
        for i, text in enumerate(self.assistant_texts):
            out.append({"role": "assistant", "content": text})
            if i < len(self.observations):
                out.append({"role": "user", "content": self.observations[i]})
        return out
