"""The multi-turn REPL rollout: token bookkeeping, environment masks, rewards, on scripted and real episodes."""

from __future__ import annotations

import pytest

from arc_trl.chat_template import env_turn_ids
from arc_trl.data import render_messages
from arc_trl.tasks import load_task
from arc_trl.rewards.trl_rewards import make_reward_func
from arc_trl.rollout import RolloutSettings, run_episodes

INSPECT = "Let me look at the shapes.\n```python\nfor x, y in zip(train_inputs, train_outputs):\n    print(x.shape, y.shape)\n```"
SOLVE = (
    "The output is the input rotated by 180 degrees.\n```python\ndef transform(g):\n    return np.rot90(g, 2)\n"
    "print(all((transform(x) == y).all() for x, y in zip(train_inputs, train_outputs)))\n"
    "SUBMIT([transform(g) for g in test_inputs])\n```"
)


class ScriptedGenerator:
    """A policy that plays fixed assistant texts, turn by turn, returning their tokens plus end-of-turn."""

    def __init__(self, tokenizer, turns_per_episode: list[list[str]]):
        self.tokenizer = tokenizer
        self.eos_token_ids = [tokenizer.eos_token_id]
        self.turns = turns_per_episode
        self.calls = 0
        self.batch_sizes: list[int] = []

    def generate(self, sequences, max_tokens, keys=None):
        self.batch_sizes.append(len(sequences))
        out = []
        for seq in sequences:
            episode = self._episode_of(seq)
            text = self.turns[episode][min(self._turn_of(seq), len(self.turns[episode]) - 1)]
            out.append(self.tokenizer(text, add_special_tokens=False)["input_ids"][: max_tokens - 1] + [self.eos_token_ids[0]])
        self.calls += 1
        return out, [[-0.5] * len(ids) for ids in out]

    def global_any(self, flag):
        return flag

    def _turn_of(self, seq):
        # the prompt opens 3 turns (system, user, assistant); each later turn adds a user and an assistant one
        return (seq.count(self.tokenizer.convert_tokens_to_ids("<|im_start|>")) - 3) // 2

    def _episode_of(self, seq):
        return next(i for i, p in enumerate(self.prompts) if tuple(seq[: len(p)]) == p)


def _scripted(tokenizer, tasks, turns, mode="repl"):
    from arc_trl.chat_template import prompt_ids

    gen = ScriptedGenerator(tokenizer, turns)
    gen.prompts = [tuple(prompt_ids(tokenizer, render_messages(t, mode))) for t in tasks]
    return gen


def test_scripted_correct_program_on_real_arc_task_gets_top_reward(tiny_tokenizer, pool):
    task = load_task("arc-agi-1/train", "6150a2bd")
    gen = _scripted(tiny_tokenizer, [task], [[INSPECT, SOLVE]])
    settings = RolloutSettings(agent_mode="repl", max_turns=4, max_completion_length=4096)
    [ep] = run_episodes([task], [render_messages(task, "repl")], gen, tiny_tokenizer, pool, settings)
    assert ep.finish_reason == "submitted"
    assert ep.outcome.num_turns == 2 and ep.outcome.submitted and ep.outcome.code_parsed
    assert ep.outcome.test_predictions == task.test_outputs
    assert "(3, 3) (3, 3)" in ep.observations[0]
    from arc_trl.data import task_to_json_string

    rows = {"task_json": [task_to_json_string(task)], "task_id": [task.id], "outcome": [ep.outcome.to_dict()]}
    for mode, top in [("barc", 10.0), ("binary", 1.0), ("partial", 1.0), ("balanced", 1.0)]:
        reward = make_reward_func(mode, "repl")(prompts=[None], completions=[None], completion_ids=[None], **rows)
        assert reward == [top], mode


def test_token_bookkeeping_matches_the_chat_template(tiny_tokenizer, pool):
    tasks = [load_task("arc-agi-1/train", "6150a2bd"), load_task("arc-agi-1/train", "67a3c6ac")]
    bad = "```python\nprint(undefined_name)\n```"
    gen = _scripted(tiny_tokenizer, tasks, [[INSPECT, SOLVE], [bad, INSPECT, bad]])
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_completion_length=4096)
    prompts = [render_messages(t, "repl") for t in tasks]
    episodes = run_episodes(tasks, prompts, gen, tiny_tokenizer, pool, settings)
    assert [ep.finish_reason for ep in episodes] == ["submitted", "max_turns"]
    assert gen.batch_sizes == [2, 2, 1]  # all active episodes generate together each turn
    for ep, prompt in zip(episodes, prompts):
        check_episode_tokens(ep, prompt, tiny_tokenizer)
        assert all(lp == (-0.5 if m else 0.0) for lp, m in zip(ep.logprobs, ep.env_mask))  # sampler's, 0 on env
    assert "NameError" in episodes[1].observations[0]
    assert episodes[1].outcome.num_errors == 2 and episodes[1].outcome.test_predictions is None


def test_budget_and_turn_truncation(tiny_tokenizer, pool):
    task = load_task("arc-agi-1/train", "6150a2bd")
    gen = _scripted(tiny_tokenizer, [task], [[INSPECT, SOLVE]])
    # the per-turn cap cuts the first turn before its end-of-turn token: the episode ends as truncated
    settings = RolloutSettings(agent_mode="repl", max_turns=4, max_tokens_per_turn=8, max_completion_length=4096)
    gen.generate = _capped(gen.generate)
    [ep] = run_episodes([task], [render_messages(task, "repl")], gen, tiny_tokenizer, pool, settings)
    assert ep.finish_reason == "truncated" and len(ep.completion_ids) == 8 and ep.completion_ids[-1] != gen.eos_token_ids[0]
    # an episode budget too small for the environment reply stops before appending it
    gen2 = _scripted(tiny_tokenizer, [task], [[INSPECT, SOLVE]])
    first_turn = len(tiny_tokenizer(INSPECT, add_special_tokens=False)["input_ids"]) + 1
    settings = RolloutSettings(agent_mode="repl", max_turns=4, max_completion_length=first_turn + 5)
    [ep] = run_episodes([task], [render_messages(task, "repl")], gen2, tiny_tokenizer, pool, settings)
    assert ep.finish_reason == "budget" and len(ep.completion_ids) == first_turn and all(ep.env_mask)


def _capped(generate):
    def inner(sequences, max_tokens, keys=None):
        ids, lps = generate(sequences, 10_000)
        return [x[:max_tokens] for x in ids], [x[:max_tokens] for x in lps]

    return inner


def test_program_mode_single_turn(tiny_tokenizer, pool):
    task = load_task("arc-agi-1/train", "6150a2bd")
    program = "```python\nimport numpy as np\ndef transform(grid):\n    return np.rot90(grid, 2)\n```"
    gen = _scripted(tiny_tokenizer, [task], [[program]], mode="program")
    settings = RolloutSettings(agent_mode="program", max_turns=1, max_completion_length=512)
    [ep] = run_episodes([task], [render_messages(task, "program")], gen, tiny_tokenizer, pool, settings)
    assert ep.finish_reason == "program" and all(ep.env_mask)
    assert ep.outcome.train_predictions == [p.output for p in task.train]
    assert ep.outcome.test_predictions == task.test_outputs


@pytest.mark.vllm
def test_real_vllm_episodes_token_by_token(memorized_model_dir, memorized_task, pool):
    """Real colocated vLLM (CPU) sampling from a model that has memorised a REPL episode: multi-turn episodes with
    code, environment replies and SUBMIT; masks, environment tokens and decoding are checked token by token, and
    the sampler's logprobs agree with a transformers forward of the same model on model tokens."""
    from transformers import AutoTokenizer
    from vllm import LLM

    from arc_trl.rollout import VLLMGenerator
    from arc_trl.integrations.vllm_cpu import make_cpu_weights_reloadable
    from model_helpers import shutdown_llm

    make_cpu_weights_reloadable()
    tokenizer = AutoTokenizer.from_pretrained(memorized_model_dir)
    llm = LLM(model=str(memorized_model_dir), dtype="float32", max_model_len=4096, max_num_seqs=8, seed=0,
              logprobs_mode="processed_logprobs")
    try:
        gen = VLLMGenerator(llm, [tokenizer.eos_token_id], temperature=1.0)
        tasks = [memorized_task] * 4
        prompts = [render_messages(memorized_task, "repl")] * 4
        settings = RolloutSettings(agent_mode="repl", max_turns=3, max_tokens_per_turn=400, max_completion_length=1500)
        episodes = run_episodes(tasks, prompts, gen, tokenizer, pool, settings)
    finally:
        shutdown_llm(llm)
    check_real_episodes(episodes, prompts, tokenizer, memorized_model_dir)


def check_episode_tokens(ep, prompt, tokenizer):
    """1. the mask is 1 exactly on model turns and 0 on environment replies; 2. environment tokens are the chat
    template's rendering of the observation (no re-tokenization); 3. unless truncated, decoding prompt + completion
    gives exactly what the chat template renders for the conversation."""
    model_positions = {i for start, end in ep.turn_spans for i in range(start, end)}
    assert [int(i in model_positions) for i in range(len(ep.completion_ids))] == ep.env_mask
    pos = 0
    for k, (start, end) in enumerate(ep.turn_spans):
        if k > 0:
            assert ep.completion_ids[pos:start] == env_turn_ids(tokenizer, ep.observations[k - 1])
        pos = end
    if ep.finish_reason != "truncated":
        decoded = tokenizer.decode(ep.prompt_ids + ep.completion_ids)
        rendered = tokenizer.apply_chat_template(prompt + ep.messages(), tokenize=False)
        assert decoded == rendered.removesuffix("\n")


def check_real_episodes(episodes, prompts, tokenizer, model_dir, logprob_tol=1e-2):
    """Token-by-token checks of sampled episodes: masks, environment tokens, decoding, sampler log-probs."""
    import torch
    from transformers import AutoModelForCausalLM

    multi = [ep for ep in episodes if len(ep.turn_spans) >= 2]
    assert multi, [ep.finish_reason for ep in episodes]
    assert any(ep.finish_reason == "submitted" for ep in episodes)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    for ep, prompt in zip(episodes, prompts):
        check_episode_tokens(ep, prompt, tokenizer)
        ids = torch.tensor([ep.prompt_ids + ep.completion_ids])
        with torch.no_grad():
            logps = model(ids).logits[0, :-1].float().log_softmax(-1)
        token_lps = logps.gather(1, ids[0, 1:, None])[:, 0][len(ep.prompt_ids) - 1 :]
        on_model = [(a, float(b)) for a, b, m in zip(ep.logprobs, token_lps, ep.env_mask) if m]
        assert max(abs(a - b) for a, b in on_model) < logprob_tol
        assert all(lp == 0.0 for lp, m in zip(ep.logprobs, ep.env_mask) if not m)


def test_real_transformers_episodes_token_by_token(memorized_model_dir, memorized_task, pool):
    """The same checks with plain transformers `generate` sampling the episodes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arc_trl.rollout import TransformersGenerator

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(memorized_model_dir)
    model = AutoModelForCausalLM.from_pretrained(memorized_model_dir).eval()
    gen = TransformersGenerator(model, tokenizer, [tokenizer.eos_token_id], batch_size=4, temperature=1.0)
    prompts = [render_messages(memorized_task, "repl")] * 4
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_tokens_per_turn=400, max_completion_length=1500)
    episodes = run_episodes([memorized_task] * 4, prompts, gen, tokenizer, pool, settings)
    check_real_episodes(episodes, prompts, tokenizer, memorized_model_dir)


class TwoEosGenerator(ScriptedGenerator):
    """Like ScriptedGenerator, but with Qwen3's two EOS ids (`<|im_end|>`, `<|endoftext|>`): turns listed in
    `endoftext_turns[episode]` stop on `<|endoftext|>` instead of the template's end-of-turn token."""

    def __init__(self, tokenizer, turns_per_episode, endoftext_turns):
        super().__init__(tokenizer, turns_per_episode)
        self.endoftext = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        self.eos_token_ids = [tokenizer.eos_token_id, self.endoftext]
        self.endoftext_turns = endoftext_turns

    def generate(self, sequences, max_tokens, keys=None):
        ids, lps = super().generate(sequences, max_tokens)
        for seq, row in zip(sequences, ids):
            if self._turn_of(seq) in self.endoftext_turns[self._episode_of(seq)]:
                row[-1] = self.endoftext
        return ids, lps


def test_turns_ending_with_the_second_eos_keep_tokens_equal_to_the_rendered_conversation(tiny_tokenizer, pool):
    from arc_trl.chat_template import prompt_ids

    tasks = [load_task("arc-agi-1/train", "6150a2bd"), load_task("arc-agi-1/train", "67a3c6ac")]
    bad = "```python\nprint(undefined_name)\n```"
    gen = TwoEosGenerator(tiny_tokenizer, [[INSPECT, SOLVE], [bad, INSPECT, bad]], [{0, 1}, {0, 1}])
    gen.prompts = [tuple(prompt_ids(tiny_tokenizer, render_messages(t, "repl"))) for t in tasks]
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_completion_length=4096)
    prompts = [render_messages(t, "repl") for t in tasks]
    episodes = run_episodes(tasks, prompts, gen, tiny_tokenizer, pool, settings)
    assert [ep.finish_reason for ep in episodes] == ["submitted", "max_turns"]
    im_end = tiny_tokenizer.eos_token_id
    for ep, prompt in zip(episodes, prompts):
        model_positions = {i for start, end in ep.turn_spans for i in range(start, end)}
        assert [int(i in model_positions) for i in range(len(ep.completion_ids))] == ep.env_mask
        # each turn followed by an environment reply ends with <|im_end|>: the <|endoftext|> the model stopped on
        # was replaced, as an environment token (not trained on: env_mask 0, logprob 0.0)
        for (_, end), _ in zip(ep.turn_spans, ep.observations):
            assert ep.completion_ids[end] == im_end and ep.env_mask[end] == 0 and ep.logprobs[end] == 0.0
        assert all(lp == (-0.5 if m else 0.0) for lp, m in zip(ep.logprobs, ep.env_mask))
        decoded = tiny_tokenizer.decode(ep.prompt_ids + ep.completion_ids)
        rendered = tiny_tokenizer.apply_chat_template(prompt + ep.messages(), tokenize=False).removesuffix("\n")
        if ep.completion_ids[-1] == gen.endoftext:  # a final turn keeps the EOS it was sampled with (trained on)
            assert ep.env_mask[-1] == 1
            rendered = rendered.removesuffix("<|im_end|>") + "<|endoftext|>"
        assert decoded == rendered
    assert episodes[0].completion_ids[-1] == gen.endoftext and episodes[1].completion_ids[-1] == im_end


def test_generation_that_does_not_stop_at_the_end_of_turn_token_fails_before_generating(tiny_tokenizer, pool):
    task = load_task("arc-agi-1/train", "6150a2bd")
    gen = _scripted(tiny_tokenizer, [task], [[SOLVE]])
    gen.eos_token_ids = [tiny_tokenizer.convert_tokens_to_ids("<|endoftext|>")]  # a base model's EOS only
    settings = RolloutSettings(agent_mode="repl", max_turns=2, max_completion_length=512)
    with pytest.raises(ValueError, match=r"ends assistant turns with '<\|im_end\|>'.*generation stops only on"):
        run_episodes([task], [render_messages(task, "repl")], gen, tiny_tokenizer, pool, settings)
    assert gen.calls == 0


def test_vllm_generator_keeps_missing_logprobs_nan():
    import math
    from types import SimpleNamespace as NS

    from arc_trl.rollout.generators import sampled_logprobs

    sample = NS(token_ids=[5, 6, 7], logprobs=[{5: NS(logprob=-0.5)}, {}, {9: NS(logprob=-0.1), 7: NS(logprob=-2.0)}])
    lps = sampled_logprobs(sample)
    assert lps[0] == -0.5 and math.isnan(lps[1]) and lps[2] == -2.0  # the sampled token's value, never 0.0
    assert all(math.isnan(lp) for lp in sampled_logprobs(NS(token_ids=[5, 6], logprobs=None)))


WRONG_SHAPE_CHECK = (  # the check of issue 64: 2x2 inputs, 6x6 outputs, so the print says False; SUBMIT in the same block
    "```python\ndef transform(g):\n    return g\n"
    "print(all(np.array_equal(transform(x), y) for x, y in zip(train_inputs, train_outputs)))\n"
    "SUBMIT([transform(g) for g in test_inputs])\n```"
)


def test_the_records_keep_the_last_code_runs_output_expected_grids_and_verdicts(tiny_tokenizer, pool, tmp_path):
    """Issue 64: the output of the code that ended the episode (never sent to the model) is in the episode, its
    completions line and its rollout dump, beside the expected grids, per-test verdicts and reward parts."""
    import json

    import torch

    from arc_trl.eval.attempts_file import Job, episode_record
    from arc_trl.trainer.rollout_dump import dump_rollouts

    task = load_task("arc-agi-1/eval", "00576224")  # 2x2 inputs, 6x6 outputs
    prompt = render_messages(task, "repl")
    gen = _scripted(tiny_tokenizer, [task], [[INSPECT, WRONG_SHAPE_CHECK]])
    settings = RolloutSettings(agent_mode="repl", max_turns=4, max_completion_length=4096)
    [ep] = run_episodes([task], [prompt], gen, tiny_tokenizer, pool, settings)
    assert ep.finish_reason == "submitted" and len(ep.observations) == 1  # the model saw one reply
    assert ep.final_observation == "False\nSUBMIT accepted: 1 grid recorded."
    record = episode_record(Job(task.id, 0, task, None), ep, prompt)
    assert record["final_observation"] == ep.final_observation
    assert record["messages"][-1]["role"] == "assistant"  # the conversation is what the model saw

    rewards = torch.tensor([0.25])
    parts = {"arc_reward_binary": [0.0], "pixel_score": [float("nan")]}
    for tokens in (True, False):
        out = tmp_path / str(tokens)
        dump_rollouts(str(out), 3, [ep], rewards, torch.tensor([0.5]), tiny_tokenizer.decode, 1, reward_parts=parts,
                      tokens=tokens)
        [dumped] = [json.loads(line) for line in (out / "rollouts" / "step_000003.jsonl").read_text().splitlines()]
        assert dumped["final_observation"] == ep.final_observation and dumped["step"] == 3
        assert dumped["test_outputs"] == task.test_outputs and dumped["test_correct"] == [False]
        assert dumped["passed"] is False and dumped["test_pixel"] == [0.0]  # 2x2 submitted, 6x6 expected
        assert dumped["outcome"]["test_predictions"] == task.test_inputs
        assert dumped["task"]["train"][0]["output"] == task.train[0].output
        assert dumped["reward"] == 0.25 and dumped["reward_parts"] == {"arc_reward_binary": 0.0, "pixel_score": None}
        assert [m["role"] for m in dumped["messages"]] == ["assistant", "user", "assistant"]
        assert ("completion_ids" in dumped) is tokens and ("env_mask" in dumped) is tokens
        assert dumped["advantage"] == 0.5 and dumped["text"].endswith(ep.assistant_texts[-1] + "<|im_end|>")
