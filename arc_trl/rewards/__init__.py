"""Rewards: per-grid scoring, the attempt outcome, reward modes and TRL reward functions."""

from arc_trl.rewards.modes import (
    REWARD_MODES,
    GridScores,
    RewardBreakdown,
    balanced_reward,
    barc_reward,
    binary_reward,
    compute_reward,
    evaluate_outcome,
    highest_reward,
    lowest_reward,
    partial_reward,
    score_grids,
)
from arc_trl.rewards.outcome import AttemptOutcome
from arc_trl.rewards.scoring import exact_match, pixel_accuracy
from arc_trl.rewards.trl_rewards import (
    COMPONENTS,
    ArcReward,
    ArcRewardComponent,
    make_component_reward_funcs,
    make_reward_func,
    make_reward_funcs,
)

__all__ = [
    "COMPONENTS",
    "REWARD_MODES",
    "ArcReward",
    "ArcRewardComponent",
    "AttemptOutcome",
    "GridScores",
    "RewardBreakdown",
    "balanced_reward",
    "barc_reward",
    "binary_reward",
    "compute_reward",
    "evaluate_outcome",
    "exact_match",
    "highest_reward",
    "lowest_reward",
    "make_component_reward_funcs",
    "make_reward_func",
    "make_reward_funcs",
    "partial_reward",
    "pixel_accuracy",
    "score_grids",
]
