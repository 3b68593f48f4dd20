"""Reward modes on hand-computed cases. toy_task: test output [[8,7],[0,9]]; train outputs [[2,1],[4,3]], [[6,0,5]]."""

import json
import pickle
from types import SimpleNamespace

import numpy as np
import pytest

from arc_trl.rewards import (
    AttemptOutcome,
    compute_reward,
    evaluate_outcome,
    lowest_reward,
    make_component_reward_funcs,
    make_reward_func,
    make_reward_funcs,
    score_grids,
)

MODES = ("binary", "partial", "balanced", "barc")


def repl(preds, parsed=True):
    return AttemptOutcome(code_found=True, code_parsed=parsed, test_predictions=preds, submitted=preds is not None)


def rewards(outcome, task, agent_mode="repl"):
    return [compute_reward(m, outcome, task, agent_mode) for m in MODES]


# --- REPL mode: test grids only --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "preds,expected",  # binary, partial, balanced, barc
    [
        ([[[8, 7], [0, 9]]], [1.0, 1.0, 1.0, 10.0]),  # exact: barc 1 + 8*1 + 1
        ([[[8, 7], [0, 0]]], [0.0, 0.75, 0.375, 1.75]),  # 3 of 4 cells: barc 1 + 8*0 + 0.75
        ([[[8, 7]]], [0.0, 0.0, 0.0, 1.0]),  # valid grid, wrong shape: pixel 0, barc 1
        ([[[1, 2], [3, 4]]], [0.0, 0.0, 0.0, 1.0]),  # right shape, every cell wrong
        ([[[8, 10], [0, 9]]], [0.0, 0.0, 0.0, 0.0]),  # colour 10: invalid -> barc 0
        ([None], [0.0, 0.0, 0.0, 0.0]),
        (None, [0.0, 0.0, 0.0, 0.0]),  # no SUBMIT
        ([np.array([[8, 7], [0, 9]])], [1.0, 1.0, 1.0, 10.0]),  # numpy grids accepted
    ],
)
def test_repl_single_test(toy_task, preds, expected):
    assert rewards(repl(preds), toy_task) == pytest.approx(expected)


def test_repl_two_tests(toy_task_two_tests):
    # targets [[2,2],[2,0]] and [[3]]: first exact, second wrong -> exact 1/2, pixel (1 + 0)/2
    assert rewards(repl([[[2, 2], [2, 0]], [[4]]]), toy_task_two_tests) == pytest.approx([0.0, 0.5, 0.25, 5.5])
    # second grid missing: not every input has a valid grid -> barc 0, pixel (1 + 0)/2
    assert rewards(repl([[[2, 2], [2, 0]]]), toy_task_two_tests) == pytest.approx([0.0, 0.5, 0.25, 0.0])
    # extra predictions are ignored
    preds = [[[2, 2], [2, 0]], [[3]], [[1]]]
    assert rewards(repl(preds), toy_task_two_tests) == pytest.approx([1.0, 1.0, 1.0, 10.0])


def test_code_not_parsed_and_missing_outcome(toy_task):
    assert compute_reward("barc", repl([[[8, 7], [0, 9]]], parsed=False), toy_task) == -1.0
    assert rewards(None, toy_task) == [0.0, 0.0, 0.0, -1.0]
    assert [lowest_reward(m) for m in MODES] == [0.0, 0.0, 0.0, -1.0]
    assert compute_reward("partial", {"code_parsed": True, "test_predictions": [[[8, 7], [0, 0]]]}, toy_task) == 0.75


# --- program mode: barc over train + test grids ----------------------------------------------------------------------


def test_program_mode_barc_uses_train_and_test(toy_task):
    outcome = AttemptOutcome(
        code_found=True,
        code_parsed=True,
        train_predictions=[[[2, 1], [4, 3]], [[6, 0, 0]]],  # exact, 2 of 3 cells
        test_predictions=[[[8, 7], [0, 9]]],  # exact
    )
    # 3 grids, 2 exact; pixel (1 + 2/3 + 1) / 3 = 8/9 -> barc 1 + 8 * 2/3 + 8/9 = 65/9
    assert compute_reward("barc", outcome, toy_task, "program") == pytest.approx(65 / 9)
    assert compute_reward("binary", outcome, toy_task, "program") == 1.0  # binary/partial: test grids only
    assert compute_reward("partial", outcome, toy_task, "program") == 1.0
    # REPL mode ignores train predictions
    assert compute_reward("barc", outcome, toy_task, "repl") == 10.0


def test_program_mode_hidden_test_outputs(toy_task_hidden):
    outcome = AttemptOutcome(
        code_parsed=True, train_predictions=[[[2, 1], [4, 3]], [[6, 0, 0]]], test_predictions=[[[1]]]
    )
    # train only: exact 1/2, pixel (1 + 2/3)/2 = 5/6 -> 1 + 4 + 5/6
    assert compute_reward("barc", outcome, toy_task_hidden, "program") == pytest.approx(35 / 6)
    with pytest.raises(ValueError, match="needs test outputs"):
        compute_reward("binary", outcome, toy_task_hidden, "program")
    with pytest.raises(ValueError, match="needs test outputs"):
        compute_reward("barc", None, toy_task_hidden, "repl")


def test_program_mode_failed_train_input(toy_task):
    outcome = AttemptOutcome(
        code_parsed=True, train_predictions=[[[2, 1], [4, 3]], None], test_predictions=[[[8, 7], [0, 9]]]
    )
    assert compute_reward("barc", outcome, toy_task, "program") == 0.0


def test_components(toy_task):
    outcome = AttemptOutcome(
        code_parsed=True, train_predictions=[[[2, 1], [4, 3]], [[6, 0, 0]]], test_predictions=[[[8, 7], [0, 0]]]
    )
    metrics = evaluate_outcome(outcome, toy_task, "program").metrics()
    assert metrics == pytest.approx(
        {
            "code_parsed": 1.0,
            "test_exact_fraction": 0.0,
            "test_pixel_score": 0.75,
            "test_valid": 1.0,
            "train_exact_fraction": 0.5,
            "train_pixel_score": 5 / 6,
            "train_valid": 1.0,
        }
    )
    assert "train_exact_fraction" not in evaluate_outcome(outcome, toy_task, "repl").metrics()


@pytest.mark.parametrize(
    "hostile",
    [
        "SUBMIT",
        {"a": 1},
        [[[True, False]]],
        [[["8", "7"], ["0", "9"]]],
        [[[8.0, 7.0], [0.0, 9.0]]],
        [[[[8]]]],
        [[[8, 7], [0]]],
        [[list(range(40))]],
        [object()],
        12,
    ],
)
def test_hostile_predictions_never_raise(toy_task, hostile):
    for mode in MODES:
        value = compute_reward(mode, {"code_parsed": True, "test_predictions": hostile}, toy_task)
        assert value == 0.0  # invalid grids: binary/partial/balanced 0, barc 0 (parsed, no valid outputs)
    assert score_grids(hostile, toy_task.test_outputs).num_valid == 0


def test_unknown_modes(toy_task):
    with pytest.raises(ValueError, match="reward mode must be one of"):
        compute_reward("dense", None, toy_task)
    with pytest.raises(ValueError, match="agent_mode must be one of"):
        make_reward_func("barc", "chat")


# --- TRL reward functions --------------------------------------------------------------------------------------------


def trl_kwargs(tasks, outcomes):
    return {
        "prompts": [[{"role": "user", "content": "x"}]] * len(tasks),
        "completions": [[{"role": "assistant", "content": "y"}]] * len(tasks),
        "completion_ids": [[1, 2]] * len(tasks),
        "task_json": [json.dumps(t.to_json()) for t in tasks],
        "task_id": [t.id for t in tasks],
        "augmentation": [""] * len(tasks),
        "outcome": outcomes,
        "trainer_state": None,
        "log_extra": None,
        "log_metric": None,
    }


def test_trl_reward_func(toy_task, toy_task_two_tests):
    func = make_reward_func("barc", "repl")
    assert func.__name__ == "arc_reward_barc"
    outcomes = [
        repl([[[8, 7], [0, 9]]]).to_dict(),
        repl([[[8, 7], [0, 0]]]).to_dict(),
        None,
        {"code_parsed": True, "test_predictions": "garbage"},
        repl([[[2, 2], [2, 0]], [[4]]]).to_dict(),
    ]
    tasks = [toy_task, toy_task, toy_task, toy_task, toy_task_two_tests]
    assert func(**trl_kwargs(tasks, outcomes)) == pytest.approx([10.0, 1.75, -1.0, 0.0, 5.5])
    assert make_reward_func("balanced")(**trl_kwargs(tasks, outcomes)) == pytest.approx([1.0, 0.375, 0.0, 0.0, 0.25])
    restored = pickle.loads(pickle.dumps(func))
    assert restored.__name__ == "arc_reward_barc" and restored(**trl_kwargs(tasks[:1], outcomes[:1])) == [10.0]


def test_trl_reward_func_missing_fields(toy_task):
    kwargs = trl_kwargs([toy_task, toy_task], [None, None])
    del kwargs["outcome"]
    assert make_reward_func("barc")(**kwargs) == [-1.0, -1.0]
    del kwargs["task_json"]
    with pytest.raises(ValueError, match="no 'task_json' column"):
        make_reward_func("barc")(**kwargs)
    with pytest.raises(ValueError, match="expected 2 outcomes"):
        make_reward_func("barc")(**trl_kwargs([toy_task, toy_task], [None]))


def test_component_funcs(toy_task, toy_task_hidden):
    names = [f.__name__ for f in make_component_reward_funcs("repl")]
    assert names == ["exact_match_fraction", "pixel_score", "valid_outputs", "code_parsed"]
    funcs = {f.__name__: f for f in make_component_reward_funcs("program")}
    outcome = AttemptOutcome(
        code_parsed=True, train_predictions=[[[2, 1], [4, 3]], [[6, 0, 0]]], test_predictions=[[[8, 7], [0, 0]]]
    )
    kwargs = trl_kwargs([toy_task, toy_task], [outcome.to_dict(), None])
    assert funcs["pixel_score"](**kwargs) == [0.75, 0.0]
    assert funcs["train_exact_match_fraction"](**kwargs) == [0.5, 0.0]
    assert funcs["valid_outputs"](**kwargs) == [1.0, 0.0]
    assert funcs["exact_match_fraction"](**trl_kwargs([toy_task_hidden], [outcome.to_dict()])) == [None]
    reward_funcs, weights = make_reward_funcs("partial", "program")
    assert [f.__name__ for f in reward_funcs][:2] == ["arc_reward_partial", "exact_match_fraction"]
    assert weights == [1.0] + [0.0] * (len(reward_funcs) - 1)


def test_trl_calling_convention(toy_task):
    """Run TRL's own GRPOTrainer._calculate_rewards with our functions on a minimal stand-in trainer."""
    import torch
    from trl.trainer.grpo_trainer import GRPOTrainer

    funcs, _ = make_reward_funcs("barc", "repl")
    stub = SimpleNamespace(
        accelerator=SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        args=SimpleNamespace(report_to=[]),
        state=SimpleNamespace(global_step=0),
        reward_funcs=funcs,
        reward_processing_classes=[None] * len(funcs),
        reward_func_names=[f.__name__ for f in funcs],
        _log_completion_extra=None,
        _log_metric=None,
        environments=None,
    )
    row = {
        "prompt": [{"role": "user", "content": "x"}],
        "task_id": toy_task.id,
        "task_json": json.dumps(toy_task.to_json()),
        "augmentation": "",
    }
    inputs = [dict(row, outcome=repl([[[8, 7], [0, 0]]]).to_dict()), dict(row, outcome=None)]
    prompts = [row["prompt"]] * 2
    completions = [[{"role": "assistant", "content": "y"}]] * 2
    result = GRPOTrainer._calculate_rewards(stub, inputs, prompts, completions, [[1], [2]])
    assert result.shape == (2, len(funcs))
    assert result[:, 0].tolist() == pytest.approx([1.75, -1.0])
    assert result[:, 2].tolist() == pytest.approx([0.75, 0.0])  # pixel_score
