"""Micro-batches grouped by length and trimmed of all-padding columns (arc_trl/trainer/micro_batches.py): the rows
keep their values, and an optimizer step's loss and gradients are TRL's own to 1e-5."""

from __future__ import annotations

import pytest
import torch
from scripted_vllm import SUBMIT, WRONG, scripted_vllm_trainer

from arc_trl.trainer.micro_batches import group_by_length, grouping_keeps_loss, padding_fraction, trim_padding

LONG = SUBMIT + "\n# " + "a much longer answer, " * 6


def _batch() -> dict:
    """3 rows: prompts left-padded to 4, completions right-padded to 5; per-row, per-token and scalar values."""
    return {
        "prompt_ids": torch.tensor([[0, 0, 5, 6], [0, 7, 8, 9], [0, 0, 1, 2]]),
        "prompt_mask": torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]]),
        "completion_ids": torch.tensor([[3, 4, 0, 0, 0], [3, 0, 0, 0, 0], [3, 4, 4, 0, 0]]),
        "completion_mask": torch.tensor([[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]]),
        "sampling_per_token_logps": torch.arange(15, dtype=torch.float).reshape(3, 5),
        "advantages": torch.tensor([1.0, -1.0, 0.5]),
        "num_items_in_batch": torch.tensor(6),
        "names": ["a", "b", "c"],
        "absent": None,
    }


def test_trim_padding_drops_only_columns_padded_in_every_row():
    batch = _batch()
    trimmed = trim_padding(batch)
    assert trimmed["prompt_ids"].tolist() == [[0, 5, 6], [7, 8, 9], [0, 1, 2]]
    assert trimmed["prompt_mask"].tolist() == [[0, 1, 1], [1, 1, 1], [0, 1, 1]]
    assert trimmed["completion_ids"].tolist() == [[3, 4, 0], [3, 0, 0], [3, 4, 4]]
    assert trimmed["sampling_per_token_logps"].tolist() == batch["sampling_per_token_logps"][:, :3].tolist()
    assert trimmed["advantages"] is batch["advantages"] and trimmed["num_items_in_batch"] is batch["num_items_in_batch"]
    assert trimmed["names"] == ["a", "b", "c"] and trimmed["absent"] is None
    assert padding_fraction(batch) == pytest.approx(1 - 13 / 27)
    assert padding_fraction(trimmed) == pytest.approx(1 - 13 / 18)
    assert trim_padding(trimmed) is trimmed  # nothing left to trim


def test_trim_padding_with_equal_prompt_and_completion_widths_trims_each_by_its_own_mask():
    batch = _batch()
    batch["completion_ids"], batch["completion_mask"] = batch["completion_ids"][:, :4], batch["completion_mask"][:, :4]
    batch["sampling_per_token_logps"] = batch["sampling_per_token_logps"][:, :4]
    trimmed = trim_padding(batch)
    assert trimmed["prompt_ids"].size(1) == 3 and trimmed["completion_ids"].size(1) == 3
    assert trimmed["sampling_per_token_logps"].size(1) == 3


def test_group_by_length_keeps_rows_together_longest_first():
    whole = _batch()
    whole = {k: (v[:2] if k != "num_items_in_batch" and v is not None else v) for k, v in whole.items()}
    other = {k: (v[2:] if k != "num_items_in_batch" and v is not None else v) for k, v in _batch().items()}
    other = {k: (torch.cat([v, v]) if isinstance(v, torch.Tensor) and v.ndim else (v + v if isinstance(v, list) else v))
             for k, v in other.items()}  # 2 copies of row c (length 5)
    grouped = group_by_length([whole, other])  # lengths a 4, b 4, c 5, c 5
    assert [b["names"] for b in grouped] == [["c", "c"], ["a", "b"]]
    assert grouped[0]["advantages"].tolist() == [0.5, 0.5] and grouped[1]["advantages"].tolist() == [1.0, -1.0]
    assert grouped[1]["prompt_ids"].tolist() == [[0, 0, 5, 6], [0, 7, 8, 9]]
    assert all(int(b["num_items_in_batch"]) == 6 and b["absent"] is None for b in grouped)
    assert group_by_length([whole]) == [whole]


@pytest.mark.parametrize("changes, reason", [
    (dict(loss_type="bnpo"), "bnpo"),
    (dict(steps_per_generation=4, gradient_accumulation_steps=2), "several optimizer steps"),
    (dict(top_entropy_quantile=0.5), "top_entropy_quantile"),
])
def test_grouping_is_refused_where_it_would_change_the_loss(tmp_path, changes, reason):
    from trl import GRPOConfig

    base = dict(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, use_cpu=True,
                report_to=[])
    assert grouping_keeps_loss(GRPOConfig(**base), entropy_bonus=False) is None
    assert "entropy bonus" in grouping_keeps_loss(GRPOConfig(**base), entropy_bonus=True)
    assert reason in grouping_keeps_loss(GRPOConfig(**(base | changes)), entropy_bonus=False)


def _step_loss_and_grad(trainer, micro_batches, loss_fn):
    trainer.model.zero_grad()
    total = 0.0
    for batch in micro_batches:
        loss = loss_fn(trainer.model, batch)
        loss.backward()
        total += loss.item()
    grad = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    return total, grad


def _interleaved_split(batch: dict) -> list[dict]:
    """TRL's split (`split_tensor_dict`) of the batch's rows put in the order longest, shortest, 2nd, 3rd: its two
    micro-batches each pair a long row with a short one, so grouping by length changes which rows share one (TRL's
    shuffle of this 4-row batch happened to put the same rows together as the grouping, which then tested nothing)."""
    from trl.trainer.utils import split_tensor_dict

    lengths = _lengths(batch)
    assert len(set(lengths)) == 4, lengths  # distinct, so the grouping is unambiguous
    by_length = sorted(range(4), key=lambda i: -lengths[i])
    order = torch.tensor([by_length[0], by_length[3], by_length[1], by_length[2]])
    rows = {k: (v[order] if isinstance(v, torch.Tensor) and v.ndim and v.size(0) == 4 else v) for k, v in batch.items()}
    return split_tensor_dict(rows, 2)


def _lengths(batch: dict) -> list[int]:
    return (batch["prompt_mask"].sum(1) + batch["completion_mask"].sum(1)).tolist()


def _grouped_and_trl_step(tiny_model_dir, tmp_path, loss_type, teacher):
    """(TRL's loss and gradient over its interleaved split, ours over the regrouped and trimmed split)."""
    from trl import GRPOTrainer

    trainer = scripted_vllm_trainer(tiny_model_dir, tmp_path, "sequence_mask", teacher, texts=[LONG, WRONG, SUBMIT],
                                    per_device_train_batch_size=2, gradient_accumulation_steps=2, loss_type=loss_type)
    try:
        trainer.current_gradient_accumulation_steps = 2
        batch = trainer._generate_and_score_completions([trainer.train_dataset[i] for i in (0, 0, 1, 1)])
        trl_split = _interleaved_split(batch)
        grouped = group_by_length(trl_split)
        before = [sorted(_lengths(b)) for b in trl_split]
        after = [sorted(_lengths(b)) for b in grouped]
        assert sorted(map(tuple, before)) != sorted(map(tuple, after)), (before, after)  # membership changed
        assert after[0][0] >= after[1][1]  # longest rows first

        def trls(model, inputs):  # TRL's compute_loss, untrimmed
            return GRPOTrainer.compute_loss(trainer, model, inputs)

        return _step_loss_and_grad(trainer, trl_split, trls), _step_loss_and_grad(trainer, grouped, trainer.compute_loss)
    finally:
        trainer.use_vllm = False
        trainer.close()


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
@pytest.mark.parametrize("teacher", [False, True], ids=["grpo", "teacher"])
def test_grouped_trimmed_micro_batches_give_trls_step_loss_and_gradients(tiny_model_dir, tmp_path, loss_type,
                                                                         teacher):
    """dapo normalises by the whole generation batch's tokens, grpo per row: regrouping only reorders float32 sums
    (relative rounding ~1e-7 per add over a few thousand tokens), so 1e-5 holds."""
    (loss_trl, grad_trl), (loss, grad) = _grouped_and_trl_step(tiny_model_dir, tmp_path, loss_type, teacher)
    assert loss == pytest.approx(loss_trl, rel=1e-5, abs=1e-6)
    torch.testing.assert_close(grad, grad_trl, rtol=1e-5, atol=1e-6)
    assert grad.norm() > 1e-4


def test_regrouping_would_change_bnpos_loss_which_is_why_it_is_refused(tiny_model_dir, tmp_path):
    """bnpo normalises each micro-batch by its own tokens: moving rows between micro-batches changes the step's loss
    (not a rounding effect: the two differ far beyond float32's 1e-5), so `grouping_keeps_loss` refuses it."""
    (loss_trl, _), (loss, _) = _grouped_and_trl_step(tiny_model_dir, tmp_path, "bnpo", teacher=False)
    assert abs(loss - loss_trl) > 1e-3 * max(1.0, abs(loss_trl)), (loss, loss_trl)


def test_training_step_regroups_trls_split_and_logs_the_same_loss(tiny_model_dir, tmp_path):
    """`Trainer.train`, one optimizer step of 2 micro-batches: with the option the loss forwards see the longest rows
    first and fewer columns; the logged loss and gradient norm are those without it."""
    logs, widths = {}, {}
    for grouped in (False, True):
        trainer = scripted_vllm_trainer(tiny_model_dir, tmp_path / str(grouped), "sequence_mask", teacher=False,
                                        texts=[LONG, WRONG, SUBMIT], per_device_train_batch_size=2,
                                        gradient_accumulation_steps=2, logging_steps=1)
        try:
            trainer.arc_config.length_grouped_micro_batches = trainer.groups_by_length = grouped
            seen = []
            inner = trainer._get_per_token_logps_and_entropies

            def recorded(model, input_ids, *args, **kwargs):
                seen.append(input_ids.size(1))
                return inner(model, input_ids, *args, **kwargs)

            trainer._get_per_token_logps_and_entropies = recorded
            trainer.train()
            logs[grouped], widths[grouped] = trainer.state.log_history[0], seen
        finally:
            trainer.use_vllm = False
            trainer.close()
    # seen[0]: TRL's no-grad old-log-prob forward over the whole batch; then one loss forward per micro-batch
    assert widths[True][0] == widths[False][0] and len(widths[True]) == 3
    assert widths[True][1] >= widths[True][2] and sum(widths[True][1:]) < 2 * widths[True][0]
    for key in ("loss", "grad_norm"):
        assert logs[True][key] == pytest.approx(logs[False][key], rel=1e-5, abs=1e-7)
