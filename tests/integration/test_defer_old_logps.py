"""`defer_old_logps`: the vLLM importance-sampling ratio (and the teacher term) from the training forward.

TRL's path (old log-probs from a no-grad forward at scoring time) and the deferred one (from the training forward's
detached log-probs) are run on the same scripted generation batch (tests/scripted_vllm.py).
"""

from __future__ import annotations

import pytest
import torch
from scripted_vllm import scripted_vllm_trainer as _trainer


def _count_logps_calls(trainer) -> list[int]:
    calls = [0]
    inner = trainer._get_per_token_logps_and_entropies

    def counted(*args, **kwargs):
        calls[0] += 1
        return inner(*args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counted
    return calls


def _loss_and_grad(trainer, batch):
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, batch)
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
    return loss.detach(), grad


SAMPLING_KEYS = ("sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max",
                 "sampling/importance_sampling_ratio/min", "sampling/importance_sampling_ratio/mean",
                 "sampling/importance_sampling_ratio/max", "sampling/masked_frac", "sampling/clipped_frac")


@pytest.mark.parametrize("teacher", [False, True], ids=["grpo", "teacher"])
@pytest.mark.parametrize("mode", ["sequence_mask", "token_truncate"])
def test_deferred_old_logps_give_trls_loss_gradients_and_metrics(tiny_model_dir, tmp_path, mode, teacher):
    from trl.trainer.utils import split_tensor_dict

    trainer = _trainer(tiny_model_dir, tmp_path, mode, teacher)
    try:
        calls = _count_logps_calls(trainer)
        rows = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
        metrics = trainer._metrics["train"]

        batch_trl = trainer._generate_and_score_completions(rows)  # TRL's path: the no-grad forward
        assert calls[0] == 1 and "old_per_token_logps" in batch_trl
        logged_trl = {key: metrics[key][-1] for key in SAMPLING_KEYS}
        micro_trl = split_tensor_dict(batch_trl, 2)[1]
        loss_trl, grad_trl = _loss_and_grad(trainer, batch_trl)
        micro_loss_trl, micro_grad_trl = _loss_and_grad(trainer, micro_trl)

        trainer.arc_config.defer_old_logps = True
        calls[0] = 0
        batch = trainer._generate_and_score_completions(rows)
        assert calls[0] == 0  # no old-log-prob forward
        assert "old_per_token_logps" not in batch and "importance_sampling_ratio" not in batch
        assert torch.equal(batch["sampling_per_token_logps"].isnan(), batch_trl["sampling_per_token_logps"].isnan())
        assert batch["sampling_per_token_logps"].isnan().any()  # the missing sampler values are kept as NaN
        assert not any(key in metrics and len(metrics[key]) > 1 for key in SAMPLING_KEYS)  # not logged at scoring
        micro = split_tensor_dict(batch, 2)[1]
        loss, grad = _loss_and_grad(trainer, batch)
        assert calls[0] == 1  # the training forward only
        micro_loss, micro_grad = _loss_and_grad(trainer, micro)

        ratio = batch["importance_sampling_ratio"]  # set at loss time
        assert ratio.shape == batch_trl["importance_sampling_ratio"].shape
        torch.testing.assert_close(ratio, batch_trl["importance_sampling_ratio"], rtol=1e-5, atol=1e-6)
        assert not torch.equal(ratio, torch.ones_like(ratio))  # a real correction
        if teacher:
            assert batch["advantages"].dim() == 2 and batch_trl["advantages"].dim() == 2
            torch.testing.assert_close(batch["advantages"], batch_trl["advantages"], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(loss, loss_trl, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(grad, grad_trl, rtol=1e-5, atol=1e-6)
        assert grad.norm() > 1e-4
        torch.testing.assert_close(micro_loss, micro_loss_trl, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(micro_grad, micro_grad_trl, rtol=1e-5, atol=1e-6)
        # the full-batch loss above logged the same sampling/* values TRL logged at scoring time
        logged = {key: metrics[key][-2] for key in SAMPLING_KEYS}  # [-1]: the micro-batch's
        assert logged == pytest.approx(logged_trl, rel=1e-5, abs=1e-6)
    finally:
        trainer.use_vllm = False
        trainer.close()


def test_deferred_training_step_through_trls_buffering_logs_trls_values(tiny_model_dir, tmp_path):
    """One optimizer step of `Trainer.train` (2 micro-batches from one generation batch, TRL's shuffle and split),
    with and without the option: the same logged loss and sampling/* means; no no-grad forward with it."""
    logs, forwards = {}, {}
    for defer in (False, True):
        trainer = _trainer(tiny_model_dir, tmp_path / str(defer), "sequence_mask", teacher=True,
                           per_device_train_batch_size=2, gradient_accumulation_steps=2, logging_steps=1)
        try:
            trainer.arc_config.defer_old_logps = defer
            calls = _count_logps_calls(trainer)
            trainer.train()
            logs[defer], forwards[defer] = trainer.state.log_history[0], calls[0]
        finally:
            trainer.use_vllm = False
            trainer.close()
    assert forwards == {False: 3, True: 2}  # 2 training forwards, plus TRL's no-grad one without the option
    # The option logs sampling/* per micro-batch and the log averages them: means agree with TRL's batch values when
    # the micro-batches hold as many tokens (here: one SUBMIT and one WRONG completion each); min / max need not.
    keys = ["loss", "sampling/sampling_logp_difference/mean", "sampling/importance_sampling_ratio/mean"]
    assert {k: logs[True][k] for k in keys} == pytest.approx({k: logs[False][k] for k in keys}, rel=1e-4, abs=1e-6)


def test_deferred_reverse_kl_teacher_term_matches(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path, "sequence_mask", teacher=True)
    try:
        trainer.arc_config.teacher_loss, trainer._teacher_kl_coef = "reverse_kl", 0.7
        rows = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
        batch_trl = trainer._generate_and_score_completions(rows)
        loss_trl, grad_trl = _loss_and_grad(trainer, batch_trl)
        trainer.arc_config.defer_old_logps = True
        batch = trainer._generate_and_score_completions(rows)
        assert "ref_per_token_logps" not in batch
        loss, grad = _loss_and_grad(trainer, batch)
        torch.testing.assert_close(batch["ref_per_token_logps"], batch_trl["ref_per_token_logps"])
        torch.testing.assert_close(loss, loss_trl, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(grad, grad_trl, rtol=1e-5, atol=1e-6)
    finally:
        trainer.use_vllm = False
        trainer.close()


@pytest.mark.parametrize("grpo, message", [
    (dict(num_iterations=2), "num_iterations: 1"),
    (dict(gradient_accumulation_steps=2, steps_per_generation=4), "multiple of steps_per_generation"),
    (dict(loss_type="vespo"), "vespo"),
    (dict(off_policy_mask_threshold=0.5), "off_policy_mask_threshold"),
])
def test_defer_old_logps_config_errors_name_the_key(tmp_path, grpo, message):
    from trl import GRPOConfig

    from arc_trl.config import ArcConfig

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, use_cpu=True,
                      report_to=[], **grpo)
    ArcConfig().check_with(args)  # off: anything goes
    with pytest.raises(ValueError, match=f"defer_old_logps.*{message}"):
        ArcConfig(defer_old_logps=True).check_with(args)
    ArcConfig(defer_old_logps=True).check_with(GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4,
                                                         num_generations=2, use_cpu=True, report_to=[]))


def test_defer_old_logps_error_from_the_command_line(tiny_model_dir):
    from arc_trl.train_entry import parse_config

    with pytest.raises(SystemExit, match="command line.*defer_old_logps.*num_iterations: 1"):
        parse_config(["--model_name_or_path", str(tiny_model_dir), "--use_cpu", "true", "--num_generations", "2",
                      "--per_device_train_batch_size", "4", "--defer_old_logps", "true", "--num_iterations", "2"])
