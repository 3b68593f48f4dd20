"""Per-episode collapse signals the trainer logs next to TRL's own: repetition inside model turns, model tokens.

Repetition is measured on model tokens only, one model turn at a time (environment replies are excluded through the
episode's `turn_spans`/`env_mask`, and a turn that re-uses code from an earlier turn is normal REPL work, not a loop):

- a token is *repeated* when it lies inside an n-gram (default n=4) that already occurred earlier in the same turn;
- `repeat_frac`: repeated model tokens / model tokens, over the whole batch;
- `repeat_run`: the longest stretch of consecutive repeated tokens of an episode (its worst turn), averaged over the
  batch. A looping completion ("in a pattern in a pattern ...") scores ~1.0 and ~its length.

Vectorised with numpy (a 64-bit polynomial hash of each n-gram, one stable argsort), ~O(L log L) per turn; the cost is
measured by benchmarks/collapse_guard_bench.py (docs/collapse.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_NGRAM = 4
_MULT = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier (golden ratio); wrap-around is the point


@dataclass
class RepetitionStats:
    tokens: int = 0  # model tokens looked at
    repeated: int = 0  # of those, tokens inside an n-gram seen earlier in the same turn
    longest_run: int = 0  # longest run of consecutive repeated tokens


def repeated_token_mask(tokens: Sequence[int] | np.ndarray, n: int = DEFAULT_NGRAM) -> np.ndarray:
    """Boolean mask over `tokens`: True where the token is inside an n-gram that occurred earlier in the sequence."""
    ids = np.asarray(tokens, dtype=np.uint64)
    length = ids.size
    mask = np.zeros(length, dtype=bool)
    if length <= n:
        return mask
    count = length - n + 1
    hashes = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            hashes = hashes * _MULT + ids[k : k + count] + np.uint64(1)
    order = np.argsort(hashes, kind="stable")  # equal n-grams end up adjacent, in order of position
    ordered = hashes[order]
    starts = order[1:][ordered[1:] == ordered[:-1]]  # every occurrence of an n-gram but its first
    if starts.size:
        cover = np.zeros(length + n, dtype=np.int32)  # mark [start, start + n) of each repeat (difference array)
        cover[starts] += 1  # distinct positions: fancy indexing adds once each
        cover[starts + n] -= 1
        mask = np.cumsum(cover[:length]) > 0
    return mask


def longest_true_run(mask: np.ndarray) -> int:
    if not mask.any():
        return 0
    padded = np.concatenate(([0], mask.astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(padded))
    return int((edges[1::2] - edges[::2]).max())


def repetition_stats(turns: Iterable[Sequence[int]], n: int = DEFAULT_NGRAM) -> RepetitionStats:
    """Repetition over the model turns of one episode (each turn on its own)."""
    stats = RepetitionStats()
    for turn in turns:
        mask = repeated_token_mask(turn, n)
        stats.tokens += mask.size
        stats.repeated += int(mask.sum())
        stats.longest_run = max(stats.longest_run, longest_true_run(mask))
    return stats


def model_turns(completion_ids: Sequence[int], env_mask: Sequence[int],
                turn_spans: Sequence[tuple[int, int]] | None = None) -> list[list[int]]:
    """The model turns of an episode: its `turn_spans` when recorded, else the maximal runs of env_mask == 1."""
    if turn_spans:
        return [list(completion_ids[start:end]) for start, end in turn_spans]
    turns, current = [], []
    for token, is_model in zip(completion_ids, env_mask):
        if is_model:
            current.append(token)
        elif current:
            turns.append(current)
            current = []
    if current:
        turns.append(current)
    return turns


def episode_repetition(episode, n: int = DEFAULT_NGRAM) -> RepetitionStats:
    """`repetition_stats` of an `arc_trl.rollout.episode.Episode` (model tokens only)."""
    if episode.turn_spans:  # one conversion to numpy, then views of each model turn
        ids = np.asarray(episode.completion_ids, dtype=np.uint64)
        return repetition_stats([ids[start:end] for start, end in episode.turn_spans], n)
    return repetition_stats(model_turns(episode.completion_ids, episode.env_mask), n)
