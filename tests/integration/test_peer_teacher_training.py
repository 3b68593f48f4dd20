"""The peer teacher on a real trainer (tiny model, LoRA): the live policy as teacher (`teacher_backend: policy`),
and one generation batch whose rewards are scripted so that exactly one group has a success."""

from __future__ import annotations

import torch

from arc_trl.chat_template import prompt_ids
from arc_trl.opd.peer import peer_block, peer_code, with_peer
from teacher_trainers import lora_trainer, record_teacher_scores

SCRIPTED = [0.0, 10.0, 0.0, 0.0]  # rows (A, A, B, B): task A's second episode reached peer_min_reward (10)


def scripted_reward(prompts=None, completions=None, **kwargs):
    return list(SCRIPTED[: len(completions)])


def _peer_trainer(model_dir, out):
    return lora_trainer(model_dir, out, grpo={"seed": 0}, reward_funcs=[scripted_reward],
                        lora_dropout=0.5,  # the teacher must score without it
                        teacher_backend="policy", teacher_tau=1.0, teacher_privileged="peer", peer_min_reward=10.0)


def test_policy_teacher_scores_with_the_adapter_on(tiny_model_dir, tmp_path):
    """A fresh LoRA adapter (B = 0) leaves the policy equal to its base; once the adapter's weights change the policy
    teacher follows them (equal to the trainer's own forward with the adapter, dropout off) and the base teacher
    does not; scoring leaves the model in training mode and is deterministic despite lora_dropout."""
    from arc_trl.opd import BaseModelTeacher, PolicyTeacher
    from arc_trl.integrations.trl_internals import per_token_logps

    trainer = _peer_trainer(tiny_model_dir, tmp_path)
    try:
        assert isinstance(trainer.teacher, PolicyTeacher)
        base = BaseModelTeacher(trainer)
        tokenizer = trainer.processing_class
        prompt = prompt_ids(tokenizer, trainer.train_dataset[0]["prompt"])
        sequences, lengths = [prompt + [5, 17, 23, 42, 8]], [len(prompt)]
        trainer.model.train()
        fresh_policy, fresh_base = trainer.teacher.score(sequences, lengths), base.score(sequences, lengths)
        assert torch.allclose(torch.tensor(fresh_policy), torch.tensor(fresh_base), atol=1e-6)
        with torch.no_grad():
            for name, param in trainer.model.named_parameters():
                if "lora_B" in name:
                    param.copy_(0.5 * torch.randn(param.shape, generator=torch.Generator().manual_seed(0)))
        policy, again = trainer.teacher.score(sequences, lengths), trainer.teacher.score(sequences, lengths)
        assert trainer.model.training and policy == again
        assert torch.allclose(torch.tensor(base.score(sequences, lengths)), torch.tensor(fresh_base), atol=1e-6)
        assert (torch.tensor(policy) - torch.tensor(fresh_policy)).abs().max() > 1e-2
        ids = torch.tensor(sequences)
        trainer.model.eval()
        with torch.no_grad():
            own = per_token_logps(trainer, trainer.model, ids, torch.ones_like(ids), 5)[0].tolist()
        assert max(abs(a - b) for a, b in zip(own, policy[0])) < 1e-5
    finally:
        trainer.close()


def test_one_batch_only_the_group_with_a_success_is_taught_by_its_peer(tiny_model_dir, tmp_path):
    """Rows (A, A, B, B), rewards (0, 10, 0, 0): the only sequence scored is A's first episode, on its prompt with
    A's second episode's code appended, followed by its own completion tokens; the other three episodes keep their
    GRPO advantage exactly and teacher_missing_episode_frac is 3/4."""
    trainer = _peer_trainer(tiny_model_dir, tmp_path)
    calls = record_teacher_scores(trainer)
    try:
        trainer.model.train()
        rows = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
        batch = trainer._generate_and_score_completions(rows)
        episodes = trainer.rollout.last_episodes
        [(sequences, lengths)] = calls
        assert len(sequences) == 1
        tokenizer = trainer.processing_class
        block = peer_block(peer_code(episodes[1].assistant_texts, trainer.arc_config.peer_max_chars), 10.0, 10.0)
        teacher_prompt = prompt_ids(tokenizer, with_peer(rows[0]["prompt"], block))
        assert sequences[0] == teacher_prompt + episodes[0].completion_ids and lengths == [len(teacher_prompt)]
        advantages = batch["advantages"]
        for i in (1, 2, 3):  # no teacher term: the row's GRPO advantage on every token
            assert torch.equal(advantages[i], advantages[i, :1].expand(advantages.shape[1]))
        assert trainer._metrics["train"]["teacher_missing_episode_frac"][-1] == 0.75
    finally:
        trainer.close()
