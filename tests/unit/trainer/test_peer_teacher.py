"""The peer teacher (`teacher_privileged: peer`): which episode teaches which, the teacher's tokens, the zero term of
groups without a success, and `teacher_missing_episode_frac`; on a stand-in trainer (no model), the tiny tokenizer."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from arc_trl.chat_template import prompt_ids
from arc_trl.config import ArcConfig
from arc_trl.opd.peer import TRUNCATED_NOTE, choose_peers, peer_block, peer_code, with_peer
from arc_trl.trainer.batch_metrics import teacher_metrics
from arc_trl.trainer.teacher_term import TeacherTerm


def test_peers_come_from_the_group_never_the_episode_itself():
    #          group 0 (A)       group 1 (B)      group 2 (C)
    rewards = [10.0, 3.0, 10.0, 3.0, 10.0, 0.0, 0.0, 1.0, 9.9]
    keys = ["A"] * 3 + ["B"] * 3 + ["C"] * 3
    peers = choose_peers(rewards, keys, 3, min_reward=10.0)
    # group 0: two successes teach each other and the failure; group 1: its only success has none;
    # group 2: none reaches the threshold (9.9 < 10), so no episode gets a peer, though group 0 has successes
    assert peers == [2, 0, 0, 4, None, 4, None, None, None]
    assert choose_peers(rewards, keys, 3, min_reward=1.0) == [1, 0, 0, 4, 3, 3, 7, 8, 7]  # the first other success


def test_a_group_mixing_prompts_is_refused():
    with pytest.raises(RuntimeError, match="episodes 2..3 of the batch are one GRPO group but come from different"):
        choose_peers([10.0, 0.0, 10.0, 0.0], ["A", "A", "A", "B"], 2, 10.0)
    with pytest.raises(ValueError, match="do not form groups of num_generations=3"):
        choose_peers([10.0, 0.0], ["A", "A"], 3, 10.0)


def test_peer_code_is_the_code_it_ran_and_the_block_goes_to_the_user_message():
    texts = ["I look first.\n```python\nprint(train_inputs[0])\n```", "no code here", "```py\nSUBMIT([x.T])\n```"]
    assert peer_code(texts, 1000) == "print(train_inputs[0])\n\nno code here\n\nSUBMIT([x.T])"
    assert peer_code(texts, 5) == "print" + TRUNCATED_NOTE
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert with_peer(messages, "BLOCK") == [{"role": "system", "content": "S"}, {"role": "user", "content": "U\n\nBLOCK"}]
    assert messages[1]["content"] == "U"  # the student's prompt is not touched


def test_config_refuses_what_cannot_work():
    with pytest.raises(ValueError, match="peer with teacher_backend=server: a server scores episodes as they finish"):
        ArcConfig(teacher_backend="server", teacher_server_url="http://x", teacher_tau=1.0, teacher_privileged="peer")
    with pytest.raises(ValueError, match="policy with teacher_privileged=none: the teacher would be the student"):
        ArcConfig(teacher_backend="policy", teacher_tau=1.0)
    with pytest.raises(ValueError, match="peer_max_chars must be >= 1"):
        ArcConfig(teacher_backend="policy", teacher_tau=1.0, teacher_privileged="peer", peer_max_chars=0)
    arc = ArcConfig(teacher_backend="policy", teacher_tau=1.0, teacher_privileged="peer")
    assert arc.peer_min_reward is None  # the reward mode's top score (barc: 10)


class RecordingTeacher:
    """Scores every completion token -1.0 and records what it was asked."""

    def __init__(self):
        self.calls = []

    def score(self, sequences, prompt_lengths):
        self.calls.append((sequences, prompt_lengths))
        return [[-1.0] * (len(s) - p) for s, p in zip(sequences, prompt_lengths)]


def _episode(prompt, completion, code):
    return SimpleNamespace(prompt_ids=prompt, completion_ids=completion, assistant_texts=[f"```python\n{code}\n```"])


def _stand_in(tokenizer, num_generations, process_index=0, **arc_overrides):
    arc = ArcConfig(teacher_backend="policy", teacher_tau=0.5, teacher_privileged="peer", **arc_overrides)
    accelerator = SimpleNamespace(process_index=process_index, num_processes=1, distributed_type="NO", device="cpu",
                                  gather=lambda t: t)
    return SimpleNamespace(arc_config=arc, teacher=RecordingTeacher(), processing_class=tokenizer,
                           chat_template_kwargs={}, accelerator=accelerator, model=SimpleNamespace(training=True),
                           num_generations=num_generations, num_generations_eval=num_generations,
                           step_clock=SimpleNamespace(phase=lambda name: _Null()))


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _rows(letters):
    return [{"task_id": f"task_{c}", "prompt": [{"role": "system", "content": "Solve."},
                                                {"role": "user", "content": f"Puzzle {c}"}]} for c in letters]


def _batch(episodes, advantages):
    width = max(len(ep.completion_ids) for ep in episodes)
    ids = torch.zeros(len(episodes), width, dtype=torch.long)
    mask = torch.zeros(len(episodes), width, dtype=torch.long)
    for i, ep in enumerate(episodes):
        ids[i, : len(ep.completion_ids)] = torch.tensor(ep.completion_ids)
        mask[i, : len(ep.completion_ids)] = 1
    return {"completion_ids": ids, "completion_mask": mask, "advantages": torch.tensor(advantages),
            "old_per_token_logps": torch.full(ids.shape, -2.0)}


def test_term_goes_to_the_right_group_with_the_students_own_tokens_and_zero_elsewhere(tiny_tokenizer):
    """Two groups of two (tasks A, B) on one process: A's second episode succeeded, B has no success. Only A's first
    episode is scored (its peer's code in the prompt, then exactly its own completion tokens); A's success (its own
    only peer) and both of B get no teacher value, their advantage stays the GRPO one exactly, and
    teacher_missing_episode_frac is 3/4."""
    trainer = _stand_in(tiny_tokenizer, 2)
    rows = _rows("AABB")
    student_prompts = [prompt_ids(tiny_tokenizer, r["prompt"]) for r in rows]
    episodes = [_episode(p, c, code) for p, c, code in zip(
        student_prompts, [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14]],
        ["print('a0')", "SUBMIT([[1]])", "print('b0')", "print('b1')"])]
    output = _batch(episodes, [0.5, -0.5, 0.0, 0.0])
    term = TeacherTerm(trainer)
    stats = term.apply(rows, episodes, output, rewards=torch.tensor([1.0, 10.0, 2.0, 9.0]))
    [(sequences, lengths)] = trainer.teacher.calls
    assert len(sequences) == 1  # A's first episode only
    teacher_prompt, completion = sequences[0][: lengths[0]], sequences[0][lengths[0]:]
    assert completion == [5, 6, 7]  # the student's own completion tokens, unchanged
    block = peer_block(peer_code(episodes[1].assistant_texts, 4000), 10.0, 10.0)
    assert teacher_prompt == prompt_ids(tiny_tokenizer, with_peer(rows[0]["prompt"], block))
    text = tiny_tokenizer.decode(teacher_prompt)
    assert "SUBMIT([[1]])" in text and "reward 10" in text and "Puzzle A" in text
    assert "print('a0')" not in text and "Puzzle B" not in text and "b1" not in text
    # the student's prompt up to its user message's text, then the block, then the same end of turn and
    # generation prompt: the completion continues both prompts alike
    student = student_prompts[0]
    end = tiny_tokenizer.decode(student).index("Puzzle A") + len("Puzzle A")
    assert text.startswith(tiny_tokenizer.decode(student)[:end])
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n") and text[:-len("<|im_end|>\n<|im_start|>assistant\n")]\
        .endswith("following the instructions above.")
    advantages = output["advantages"]
    assert torch.equal(advantages[1:], torch.tensor([-0.5, 0.0, 0.0]).unsqueeze(1).expand(3, advantages.shape[1]))
    assert torch.allclose(advantages[0, :3], torch.full((3,), 0.5 + 0.5 * (-1.0 - -2.0)))
    assert stats.missing_episodes == 3 and stats.num_episodes == 4
    metrics = teacher_metrics(trainer.accelerator, stats)
    assert metrics["teacher_missing_episode_frac"] == 0.75
    assert metrics["teacher_missing_frac"] == pytest.approx(7 / 10)  # tokens: 2 + 4 + 1 of 10 have no value


def test_no_success_anywhere_scores_nothing_and_the_term_is_exactly_zero(tiny_tokenizer):
    trainer = _stand_in(tiny_tokenizer, 2)
    rows = _rows("AABB")
    episodes = [_episode(prompt_ids(tiny_tokenizer, r["prompt"]), [3, 4], "x = 1") for r in rows]
    for loss in ("advantage", "reverse_kl"):
        trainer.arc_config.teacher_loss = loss
        output = _batch(episodes, [1.0, -1.0, 0.25, -0.25])
        stats = TeacherTerm(trainer).apply(rows, episodes, output, rewards=torch.tensor([9.0, 1.0, 0.0, -1.0]))
        assert trainer.teacher.calls == []
        if loss == "advantage":
            assert torch.equal(output["advantages"], torch.tensor([[1.0] * 2, [-1.0] * 2, [0.25] * 2, [-0.25] * 2]))
        else:  # the KL reference is the student itself: k3 = exp(0) - 0 - 1 = 0 on every token
            assert torch.equal(output["ref_per_token_logps"], output["old_per_token_logps"])
        assert teacher_metrics(trainer.accelerator, stats)["teacher_missing_episode_frac"] == 1.0


def test_a_group_spanning_two_processes_gets_its_peer_from_the_other_process(tiny_tokenizer, monkeypatch):
    """num_generations 2, three rows per process: group 1 is row 2 (process 0) and row 3 (process 1). Process 1's row
    3 is taught by row 2's code, gathered from process 0; the groups of process 1 alone follow their own rewards."""
    import accelerate.utils

    trainer = _stand_in(tiny_tokenizer, 2, process_index=1, peer_min_reward=5.0)
    rows = _rows("AABBCC")  # global rows; groups (0, 1) (2, 3) (4, 5); process 1 holds rows 3, 4, 5
    from arc_trl.trainer.peer_prompts import prompt_key

    process0 = [(prompt_key(r), code) for r, code in zip(rows[:3], [None, None, "print('from process 0')"])]
    # process 0's rows as gather_object returns them: (prompt key, code of a success, None otherwise)
    monkeypatch.setattr(accelerate.utils, "gather_object", lambda local: process0 + list(local))
    local_rows = rows[3:]
    episodes = [_episode(prompt_ids(tiny_tokenizer, r["prompt"]), [7, 8], code)
                for r, code in zip(local_rows, ["print('b')", "print('c0')", "print('c1')"])]
    output = _batch(episodes, [0.0, 0.0, 0.0])
    stats = TeacherTerm(trainer).apply(local_rows, episodes, output,
                                       rewards=torch.tensor([0.0, 0.0, 6.0, 1.0, 1.0, 7.0]))
    [(sequences, lengths)] = trainer.teacher.calls
    texts = [tiny_tokenizer.decode(s[:n]) for s, n in zip(sequences, lengths)]
    assert len(texts) == 2 and "print('from process 0')" in texts[0] and "Puzzle B" in texts[0]
    assert "print('c1')" in texts[1] and "Puzzle C" in texts[1]  # row 4 taught by row 5; row 5 has no peer
    assert stats.missing_episodes == 1


@pytest.mark.parametrize("mode", ["binary", "partial", "balanced", "barc"])
@pytest.mark.parametrize("agent_mode", ["repl", "program"])
def test_the_default_threshold_is_reached_by_a_solve_and_by_nothing_less(mode, agent_mode, toy_task):
    """peer_min_reward: null is the mode's top reward: every evaluated grid exact reaches it; one wrong cell does
    not (under barc in program mode, a train grid wrong is enough to fall short)."""
    from arc_trl.rewards import AttemptOutcome, compute_reward, highest_reward
    from arc_trl.trainer.peer_prompts import min_peer_reward

    threshold = min_peer_reward(ArcConfig(reward_mode=mode))
    assert threshold == highest_reward(mode)
    train = [p.output for p in toy_task.train]
    solved = AttemptOutcome(code_found=True, code_parsed=True, test_predictions=toy_task.test_outputs,
                            train_predictions=train, submitted=True)
    assert compute_reward(mode, solved, toy_task, agent_mode) >= threshold
    near = [[[8, 7], [0, 0]]]  # 3 of 4 cells of the test output
    near_miss = AttemptOutcome(code_found=True, code_parsed=True, test_predictions=near, train_predictions=train,
                               submitted=True)
    assert compute_reward(mode, near_miss, toy_task, agent_mode) < threshold
    if mode == "barc" and agent_mode == "program":
        wrong_train = AttemptOutcome(code_found=True, code_parsed=True, test_predictions=toy_task.test_outputs,
                                     train_predictions=[train[0], [[6, 0, 0]]], submitted=True)
        assert compute_reward(mode, wrong_train, toy_task, agent_mode) < threshold


@pytest.mark.parametrize("custom", ["weights", "funcs"])
def test_the_default_peer_threshold_is_refused_with_rewards_other_than_arc_trls_own(tmp_path, custom):
    """peer_min_reward: null means the reward mode's top score, which the weighted reward reaches only with arc-trl's
    reward functions and weights: halved weights would leave no episode a peer, silently (before: no error)."""
    from trl import GRPOConfig

    from arc_trl.config import ArcConfig
    from arc_trl.rewards.trl_rewards import make_reward_funcs
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(teacher_privileged="peer", teacher_backend="policy", teacher_tau=0.1)
    _, weights = make_reward_funcs(arc.reward_mode, arc.agent_mode, arc.log_reward_components)
    halved = [w / 2 for w in weights] if custom == "weights" else None
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], reward_weights=halved)
    funcs = [lambda completions, **kw: [0.0] * len(completions)] if custom == "funcs" else None
    with pytest.raises(ValueError, match="set peer_min_reward"):
        ArcGRPOTrainer("no-model-is-loaded-before-this-check", args, arc, reward_funcs=funcs)
