"""Step-time budget (StepClock, TimedPool, MFU) and the vLLM importance-sampling mask/clip shares, on hand-made data."""

from __future__ import annotations

import math
import threading

import pytest
import torch

from arc_trl.trainer.sampling_mismatch import importance_sampling_hits, mismatch_counts
from arc_trl.trainer.step_timing import BUCKETS, StepClock, TimedPool, count_model_params, step_metrics


class FakeTime:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_step_clock_charges_each_moment_to_the_innermost_phase():
    now = FakeTime()
    clock = StepClock(sync=lambda: None, now=now)
    with clock.phase("train"):  # no step open: not charged
        now.t += 50
    clock.begin()
    now.t += 1  # other
    with clock.phase("train"):
        now.t += 2
        with clock.phase("generate"):
            now.t += 3
            with clock.phase("weight_sync"):
                now.t += 0.5
            with clock.phase("sandbox"):
                now.t += 4
            now.t += 1
        with clock.phase("teacher"):
            now.t += 0.25
        now.t += 2
    now.t += 0.125  # other
    times = clock.end()
    assert times == {"generate": 4.0, "sandbox": 4.0, "teacher": 0.25, "weight_sync": 0.5, "train": 4.0,
                     "other": 1.125, "step": 13.875}
    assert sum(times[b] for b in BUCKETS) == times["step"]
    assert clock.end() == {}  # closed


def test_step_clock_ignores_phases_of_other_threads_and_unknown_names():
    now = FakeTime()
    clock = StepClock(sync=lambda: None, now=now)
    clock.begin()
    with clock.phase("generate"):
        def worker():
            with clock.phase("sandbox"):
                now.t += 5  # overlaps the generate phase of the step's own thread
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    times = clock.end()
    assert times["generate"] == 5 and times["sandbox"] == 0 and times["step"] == 5
    clock.begin()
    with pytest.raises(ValueError, match="unknown step-time bucket 'gen'"):
        with clock.phase("gen"):
            pass


def test_timed_pool_charges_method_calls_to_sandbox():
    now = FakeTime()
    clock = StepClock(sync=lambda: None, now=now)

    class Pool:
        num_workers = 2

        def map_turns(self, items):
            now.t += 3
            return [x * 2 for x in items]

    pool = TimedPool(Pool(), clock)
    clock.begin()
    with clock.phase("generate"):
        now.t += 1
        assert pool.map_turns([1, 2]) == [2, 4] and pool.num_workers == 2
    times = clock.end()
    assert times["sandbox"] == 3 and times["generate"] == 1


def test_step_metrics_tokens_per_s_and_mfu():
    times = {"generate": 2.0, "sandbox": 1.0, "teacher": 0.0, "weight_sync": 0.5, "train": 4.0, "other": 0.5,
             "step": 8.0}
    m = step_metrics(times, generated_tokens=300, trained_tokens=1000, no_grad_tokens=500, num_params=10**6,
                     peak_flops_total=1e12)
    assert m["throughput/generated_tokens_per_s"] == 150 and m["throughput/trained_tokens_per_s"] == 250
    assert m["mfu"] == pytest.approx((6 * 1e6 * 1000 + 2 * 1e6 * 500) / (8.0 * 1e12))
    assert "mfu" not in step_metrics(times, 300, 1000, 500, 10**6, None)  # CPU without peak_tflops: absent
    assert set(m) >= {f"time/{b}" for b in (*BUCKETS, "step")}


def test_count_model_params_skips_an_untied_input_embedding_only():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=8)
    tied = Qwen3ForCausalLM(Qwen3Config(**config, tie_word_embeddings=True))
    untied = Qwen3ForCausalLM(Qwen3Config(**config, tie_word_embeddings=False))
    assert count_model_params(tied) == sum(p.numel() for p in tied.parameters())  # the embedding is the lm_head
    assert count_model_params(untied) == sum(p.numel() for p in untied.parameters()) - 64 * 16


# two sequences of 4 positions; sequence 0: 3 model tokens + 1 env token; sequence 1: 2 model tokens + 2 padding
MASK = torch.tensor([[1, 1, 0, 1], [1, 1, 0, 0]], dtype=torch.float32)
TRAINER = torch.tensor([[-1.0, -2.0, -9.0, -0.5], [-1.0, -1.0, 0.0, 0.0]])
# log-ratios trainer - sampler on model tokens: [+1.5, 0, (env), -2.0] and [+0.5, +0.5]
SAMPLER = torch.tensor([[-2.5, -2.0, 5.0, 1.5], [-1.5, -1.5, float("nan"), float("nan")]])


@pytest.mark.parametrize(
    ("mode", "clip_min", "clip_max", "masked", "clipped"),
    [
        # token ratios e^1.5=4.48, 1, e^-2=0.135 | e^0.5=1.65, 1.65; cap 3: token 0 of sequence 0 only
        ("token_mask", None, 3.0, [[1, 0, 0, 0], [0, 0, 0, 0]], None),
        ("token_truncate", None, 3.0, None, [[1, 0, 0, 0], [0, 0, 0, 0]]),
        # with a floor of 0.5 the e^-2 token is hit too (the env token's ratio is 1, never hit)
        ("token_mask", 0.5, 3.0, [[1, 0, 0, 1], [0, 0, 0, 0]], None),
        # sequence ratios e^(1.5+0-2)=0.61 and e^1=2.72: with cap 2.5 sequence 1 is hit, all its model tokens
        ("sequence_mask", None, 2.5, [[0, 0, 0, 0], [1, 1, 0, 0]], None),
        ("sequence_truncate", 0.7, 3.0, None, [[1, 1, 0, 1], [0, 0, 0, 0]]),
    ],
)
def test_importance_sampling_hits_match_trls_rule(mode, clip_min, clip_max, masked, clipped):
    got_masked, got_clipped = importance_sampling_hits(TRAINER, SAMPLER, MASK, mode, clip_min, clip_max)
    zeros = [[0] * 4] * 2
    assert got_masked.int().tolist() == (masked or zeros)
    assert got_clipped.int().tolist() == (clipped or zeros)


def test_mismatch_counts_give_exact_token_and_episode_shares():
    masked, clipped = importance_sampling_hits(TRAINER, SAMPLER, MASK, "token_mask", 0.5, 3.0)
    c = mismatch_counts(masked, clipped, MASK)
    assert (c.model_tokens, c.masked_tokens, c.clipped_tokens) == (5, 2, 0)
    assert (c.episodes, c.masked_episodes, c.clipped_episodes) == (2, 1, 0)
    assert math.isclose(c.masked_tokens / c.model_tokens, 0.4)
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode='token' is not one of"):
        importance_sampling_hits(TRAINER, SAMPLER, MASK, "token", None, 3.0)


def test_token_share_can_exceed_episode_share_when_the_masked_episode_is_long():
    """The two shares are independent: 1 of 2 episodes masked, but it holds 3 of the 4 model tokens."""
    model_mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    masked = torch.tensor([[False, False, False], [True, True, True]])
    c = mismatch_counts(masked, torch.zeros_like(masked), model_mask)
    assert (c.masked_tokens / c.model_tokens, c.masked_episodes / c.episodes) == (0.75, 0.5)
