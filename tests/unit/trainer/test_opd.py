"""The on-policy-distillation formulas on hand-computed tensors (masking, padding, missing values, clipping)."""

import math

import pytest
import torch

from arc_trl.opd import opd_advantages, teacher_log_ratio, teacher_stats

NAN = float("nan")


def test_teacher_tau_zero_is_the_grpo_advantage():
    adv = torch.tensor([1.5, -0.5])
    t = torch.tensor([[-1.0, -2.0, -3.0], [-0.1, NAN, -9.0]])
    s = torch.tensor([[-2.0, -2.0, -1.0], [-0.2, -0.3, -0.4]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    out = opd_advantages(adv, t, s, mask, adv_tau=1.0, teacher_tau=0.0)
    assert out.shape == (2, 3)
    assert torch.equal(out, adv.unsqueeze(1).expand(2, 3))


def test_hand_computed_hybrid_advantages_with_mask_padding_and_missing_teacher():
    adv = torch.tensor([2.0, -1.0])
    # row 0: model, model, env, pad ; row 1: model, model(teacher missing), model, pad
    t = torch.tensor([[-1.0, -4.0, -0.5, 0.0], [-1.0, -math.inf, -2.0, 0.0]])
    s = torch.tensor([[-2.0, -1.0, -3.0, 0.0], [-1.5, -1.0, -2.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]])
    out = opd_advantages(adv, t, s, mask, adv_tau=0.5, teacher_tau=2.0)
    expected = torch.tensor(
        [
            [0.5 * 2 + 2 * (-1 - -2), 0.5 * 2 + 2 * (-4 - -1), 0.5 * 2, 0.5 * 2],
            [0.5 * -1 + 2 * (-1 - -1.5), 0.5 * -1, 0.5 * -1 + 2 * 0.0, 0.5 * -1],
        ]
    )
    assert torch.allclose(out, expected)


def test_pure_distillation_and_clipping():
    adv = torch.tensor([5.0])
    t = torch.tensor([[-30.0, -1.0]])
    s = torch.tensor([[-1.0, -31.0]])
    mask = torch.tensor([[1, 1]])
    out = opd_advantages(adv, t, s, mask, adv_tau=0.0, teacher_tau=1.0, clip=10.0)
    assert torch.allclose(out, torch.tensor([[-10.0, 10.0]]))
    diff, missing, clipped = teacher_log_ratio(t, s, mask, clip=10.0)
    assert clipped.tolist() == [[True, True]] and not missing.any()
    assert not diff.requires_grad


def test_teacher_stats():
    t = torch.tensor([[-1.0, NAN, -2.0, -7.0]])
    s = torch.tensor([[-3.0, -1.0, -2.5, -1.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    stats = teacher_stats(t, s, mask, clip=1.0)
    # valid model tokens: 0 and 2 -> student - teacher = -2 and -0.5
    assert stats.teacher_kl == pytest.approx((-2 - 0.5) / 2)
    assert stats.teacher_logp == pytest.approx(-1.5)
    assert stats.student_logp == pytest.approx(-2.75)
    assert stats.missing_frac == pytest.approx(1 / 3)
    assert stats.clipped_frac == pytest.approx(1 / 3)  # only |diff| = 2 exceeds the clip
    assert stats.num_tokens == 3


def test_an_episode_masked_out_whole_is_not_counted_as_missing_its_teacher():
    """A row with no model token in the loss (truncated, over budget) is no episode without a teacher value: the
    episode counts skip it (before: it counted as missing for every teacher, not only a peer group without success)."""
    from arc_trl.opd import teacher_stats

    teacher = torch.tensor([[-1.0, -1.0], [float("nan"), float("nan")], [-1.0, -1.0]])
    student = torch.full((3, 2), -2.0)
    mask = torch.tensor([[1, 1], [1, 0], [0, 0]])  # row 1: no teacher value; row 2: masked out whole
    stats = teacher_stats(teacher, student, mask, None)
    assert (stats.num_episodes, stats.missing_episodes) == (2.0, 1.0)
