"""benchmarks/fp8_gap_cpu.py's arithmetic: the sampler/trainer differences and the importance-sampling ratios TRL
would make of them (the engines and the model it runs are vLLM's and transformers'; docs/fp8.md quotes its output)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "fp8_gap_cpu.py"


def _script():
    spec = importlib.util.spec_from_file_location("fp8_gap_cpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gap_is_trainer_minus_sampler_per_token_and_its_sum_per_sequence_against_trls_cap():
    gap = _script().gap
    samples = [{"logps": [-1.0, -1.0]}, {"logps": [-2.0]}]
    trainer = [[-1.5, -1.5], [-0.5]]  # differences -0.5, -0.5 (sum -1.0) and +1.5 (> log 3: above the cap)
    found = gap(samples, trainer)
    assert (found["sequences"], found["model_tokens"], found["mean_tokens"]) == (2, 3, 1.5)
    assert found["sampling_logp_difference_mean"] == pytest.approx(2.5 / 3)
    assert found["sampling_logp_difference_max"] == pytest.approx(1.5)
    assert found["token_signed_mean"] == pytest.approx(0.5 / 3)
    assert found["token_ratio_above_cap_frac"] == pytest.approx(1 / 3)
    assert found["sequence_ratio_above_cap_frac"] == 0.5  # exp(1.5) > 3: sequence_mask zeroes that episode
    assert found["sequence_ratio_below_third_frac"] == 0.0  # exp(-1.0) = 0.37 > 1/3
    assert found["sequence_log_ratio"]["min"] == pytest.approx(-1.0) and found["sequence_log_ratio"]["max"] == 1.5
    assert math.log(3.0) < 1.5  # the premise of the cap figures above


def test_the_trainer_side_log_probs_are_each_sampled_tokens_given_its_prefix_at_the_temperature(tiny_model_dir):
    """`trainer_logps` slices one forward of prompt + completion; the reference runs one forward per prefix."""
    import torch
    from transformers import AutoModelForCausalLM

    trainer_logps = _script().trainer_logps
    sample = {"prompt": [5, 9, 2], "tokens": [7, 3, 11]}
    [found] = trainer_logps(str(tiny_model_dir), [sample], temperature=0.7)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).eval()
    ids = sample["prompt"] + sample["tokens"]
    with torch.no_grad():
        expected = [torch.log_softmax(model(input_ids=torch.tensor([ids[:n]])).logits[0, -1].float() / 0.7, -1)[ids[n]]
                    .item() for n in range(len(sample["prompt"]), len(ids))]
    # bf16 forwards of different lengths may round differently (a bf16 logit step, ~1/128 relative); a slice off by
    # one scores another token, about a nat away in this model
    assert found == pytest.approx(expected, abs=0.05)
    assert len(found) == len(sample["tokens"])
