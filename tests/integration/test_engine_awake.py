"""A colocated sleep-mode vLLM engine through a lock-step rollout: awake for the whole rollout, not per turn.

TRL's own `VLLMGeneration` (its `generate` and `sync_weights`, unchanged) drives a recording engine that stands in for
`vllm.LLM`: it checks that nothing generates or loads weights into a sleeping engine, and models vLLM's prefix cache
(what a new request finds of an earlier one's tokens while the KV cache lives) to count the tokens each turn prefills.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("vllm")  # TRL's VLLMGeneration builds vLLM's SamplingParams

CODE = "```python\nprint(len(train_inputs))\n```"  # runs, submits nothing: every episode plays all its turns
TURNS = 3


class RecordingEngine:
    """Stands in for a colocated `vllm.LLM` with sleep mode: the calls, in order, and the tokens each
    `generate` had to prefill (the prompt minus the longest prefix still in the KV cache)."""

    def __init__(self, reply_ids: list[int], fail_at_call: int | None = None) -> None:
        self.reply_ids = reply_ids
        self.fail_at_call = fail_at_call
        self.fail_wake: str | None = None  # a tag whose wake runs out of memory half-way (some of it mapped)
        self.calls: list[tuple] = []
        self.prefilled: list[int] = []
        self.asleep = {"weights": True, "kv_cache": True}
        self.cached: list[list[int]] = []  # sequences whose KV blocks the cache still holds
        model = SimpleNamespace(load_weights=self._load_weights)
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=model))))

    def _load_weights(self, weights) -> None:
        assert not self.asleep["weights"], "weights loaded into a sleeping engine"
        if not self.calls or self.calls[-1] != ("load_weights",):
            self.calls.append(("load_weights",))

    def wake_up(self, tags=None) -> None:
        tags = tuple(tags or ("weights", "kv_cache"))
        self.calls.append(("wake_up", tags))
        for tag in tags:
            self.asleep[tag] = False
            if tag == self.fail_wake:
                raise RuntimeError(f"CUDA out of memory while waking {tag}")

    def sleep(self, level: int = 1) -> None:
        self.calls.append(("sleep", level))
        self.asleep = {"weights": True, "kv_cache": True}
        self.cached = []

    def reset_prefix_cache(self) -> None:
        self.calls.append(("reset_prefix_cache",))
        self.cached = []

    def generate(self, prompts, sampling_params, use_tqdm=False):
        assert not any(self.asleep.values()), f"generate on a sleeping engine: {self.asleep}"
        self.calls.append(("generate", len(prompts)))
        if self.fail_at_call is not None and sum(c[0] == "generate" for c in self.calls) == self.fail_at_call:
            raise RuntimeError("engine failure")
        outputs, prefilled, done = [], 0, []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            hit = max((_common_prefix(ids, seq) for seq in self.cached), default=0)
            prefilled += len(ids) - hit
            reply = self.reply_ids[: sampling_params.max_tokens]
            done.append(list(ids) + reply)  # cached once the call has run (a request never hits its own batch)
            logprobs = [{t: SimpleNamespace(logprob=-0.5, rank=1)} for t in reply]
            outputs.append(SimpleNamespace(prompt_token_ids=ids,
                                           outputs=[SimpleNamespace(token_ids=reply, logprobs=logprobs)]))
        self.cached += done
        self.prefilled.append(prefilled)
        return outputs


def _common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _zero_runs(mask: list[int]) -> list[int]:
    """Lengths of the runs of 0 (environment tokens) in an episode's `env_mask`."""
    runs, previous = [], 1
    for value in mask:
        if value == 0:
            runs[-1:] = [runs[-1] + 1] if previous == 0 else [*runs[-1:], 1]
        previous = value
    return runs


def _trainer(model_dir, out, engine_reply: str, fail_at_call: int | None = None):
    from trl import GRPOConfig, ModelConfig
    from trl.generation.vllm_generation import VLLMGeneration

    from arc_trl.config import ArcConfig
    from arc_trl.data import build_dataset
    from arc_trl.tasks import load_tasks
    from arc_trl.train_entry import load_tokenizer
    from arc_trl.trainer import ArcGRPOTrainer

    arc = ArcConfig(max_turns=TURNS, max_tokens_per_turn=64, sandbox_workers=2)
    args = GRPOConfig(output_dir=str(out), num_generations=2, per_device_train_batch_size=4, max_steps=1,
                      max_completion_length=512, use_cpu=True, bf16=False, report_to=[], seed=0, beta=0.0)
    tokenizer, _ = load_tokenizer(ModelConfig(model_name_or_path=str(model_dir)))
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd", "67a3c6ac"]), "repl", tokenizer=tokenizer)
    trainer = ArcGRPOTrainer(str(model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer)
    reply = tokenizer(engine_reply, add_special_tokens=False)["input_ids"] + [trainer.end_of_turn]
    engine = RecordingEngine(reply, fail_at_call)
    vg = object.__new__(VLLMGeneration)  # TRL's class and methods; the engine is the recording one
    vg.__dict__.update(
        mode="colocate", enable_sleep_mode=True, _llm_weights_sleeping=True, llm=engine, model=trainer.model,
        accelerator=trainer.accelerator, tensor_parallel_size=1, structured_outputs_regex=None, generation_kwargs={},
        temperature=1.0, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0, max_completion_length=64, logprobs=0,
    )
    params = list(trainer.model.named_parameters())[:2]
    vg._iter_named_params = lambda: iter(params)
    trainer.use_vllm, trainer.vllm_generation = True, vg
    trainer._last_loaded_step = -1  # a new step: TRL's rollout_func path pushes the weights first
    return trainer, engine


def _rollout(trainer):
    rows = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
    with trainer.rollout.rows_for(rows):
        return trainer._generate([row["prompt"] for row in rows])


def test_lockstep_rollout_keeps_a_sleep_mode_engine_awake_across_turns(tiny_model_dir, tmp_path):
    """One weight push, one wake of the KV cache and one level-2 sleep per rollout (TRL's generate alone: one each per
    turn); turns 2 and 3 prefill only the environment's reply; the engine ends asleep as TRL expects it."""
    trainer, engine = _trainer(tiny_model_dir, tmp_path, CODE)
    try:
        _rollout(trainer)
        episodes = trainer.rollout.last_episodes
        assert [len(ep.assistant_texts) for ep in episodes] == [TURNS] * 4
        assert engine.calls == [
            ("wake_up", ("weights",)), ("load_weights",), ("reset_prefix_cache",),  # TRL: sync at a new step
            ("wake_up", ("kv_cache",)),
            *[("generate", 4)] * TURNS,
            ("sleep", 2),
        ]
        vg = trainer.vllm_generation
        assert vg.enable_sleep_mode is True and vg._llm_weights_sleeping is True
        # turn 1 prefills the prompts; turn t+1 only the environment's reply to turn t (the model's tokens are cached)
        env_replies = [_zero_runs(ep.env_mask) for ep in episodes]
        assert all(len(runs) >= TURNS - 1 for runs in env_replies)
        assert engine.prefilled == [sum(len(ep.prompt_ids) for ep in episodes),
                                    *[sum(runs[t] for runs in env_replies) for t in range(TURNS - 1)]]
    finally:
        trainer.close()


def test_engine_sleeps_when_a_turn_fails(tiny_model_dir, tmp_path):
    """An engine error in turn 2 propagates, and the engine is put back to sleep with TRL's sleep-mode state
    restored, so the next step's generation starts from the state TRL expects."""
    trainer, engine = _trainer(tiny_model_dir, tmp_path, CODE, fail_at_call=2)
    try:
        with pytest.raises(RuntimeError, match="engine failure"):
            _rollout(trainer)
        assert engine.calls[-1] == ("sleep", 2)
        assert trainer.vllm_generation.enable_sleep_mode is True
        assert trainer.vllm_generation._llm_weights_sleeping is True
    finally:
        trainer.close()


def _evaluation_batch(trainer) -> None:
    """What an evaluation callback does at a new step (its episodes elided): `engine_awake` pushes the weights."""
    from arc_trl.integrations.trl_internals import engine_awake

    with engine_awake(trainer):
        pass


@pytest.mark.parametrize("tag, rollouts_before, play", [
    ("kv_cache", 0, _rollout),  # the KV cache's wake, once TRL has pushed the step's weights
    ("weights", 1, _rollout),  # the re-push of a second rollout in the same step (the first one's sleep dropped them)
    ("weights", 0, _evaluation_batch),  # the push of a new step outside TRL's rollout path
], ids=["kv-cache", "weights-second-rollout", "weights-evaluation"])
def test_engine_sleeps_when_waking_it_fails(tiny_model_dir, tmp_path, tag, rollouts_before, play):
    """A wake that runs out of memory half-way propagates, and the engine is put back to sleep with TRL's sleep-mode
    state: it holds no memory through the optimizer step, and the next rollout re-pushes the weights and generates
    as usual."""
    trainer, engine = _trainer(tiny_model_dir, tmp_path, CODE)
    try:
        for _ in range(rollouts_before):
            _rollout(trainer)
        engine.fail_wake = tag
        with pytest.raises(RuntimeError, match=f"out of memory while waking {tag}"):
            play(trainer)
        assert engine.calls[-2:] == [("wake_up", (tag,)), ("sleep", 2)]
        assert engine.asleep == {"weights": True, "kv_cache": True}
        vg = trainer.vllm_generation
        assert vg.enable_sleep_mode is True and vg._llm_weights_sleeping is True
        engine.fail_wake, failed = None, len(engine.calls)
        _rollout(trainer)
        assert engine.calls[failed:failed + 4] == [("wake_up", ("weights",)), ("load_weights",),
                                                   ("reset_prefix_cache",), ("wake_up", ("kv_cache",))]
        assert engine.calls[-1] == ("sleep", 2) and vg.enable_sleep_mode is True
    finally:
        trainer.close()


def test_a_second_rollout_in_the_same_step_pushes_the_weights_again(tiny_model_dir, tmp_path):
    """The first rollout ends with the weights discarded (level-2 sleep); a second one in the same step (TRL does not
    push again: the step is unchanged) must re-push them before it generates."""
    trainer, engine = _trainer(tiny_model_dir, tmp_path, CODE)
    try:
        _rollout(trainer)
        first = len(engine.calls)
        _rollout(trainer)
        assert engine.calls[first:first + 4] == [("wake_up", ("weights",)), ("load_weights",), ("reset_prefix_cache",),
                                                 ("wake_up", ("kv_cache",))]
        assert engine.calls[-1] == ("sleep", 2)
    finally:
        trainer.close()


def test_outside_trls_rollout_path_the_weights_of_a_new_step_are_pushed_once(tiny_model_dir, tmp_path):
    """An evaluation callback's episodes (`run_episodes` inside `engine_awake`, no TRL `_generate` before them) at a
    new step: the weights are pushed once, on entry, and the step is recorded so the turns do not push them again."""
    from arc_trl.rollout import TrainerGenerator, run_episodes
    from arc_trl.rollout.arc_rollout import task_from_row
    from arc_trl.integrations.trl_internals import engine_awake

    trainer, engine = _trainer(tiny_model_dir, tmp_path, CODE)
    try:
        rows = [trainer.train_dataset[i] for i in (0, 1)]
        with engine_awake(trainer):
            run_episodes([task_from_row(r) for r in rows], [r["prompt"] for r in rows], TrainerGenerator(trainer),
                         trainer.processing_class, trainer.sandbox_pool, trainer.rollout.settings,
                         trainer.chat_template_kwargs)
        assert engine.calls == [("wake_up", ("weights",)), ("load_weights",), ("reset_prefix_cache",),
                                ("wake_up", ("kv_cache",)), *[("generate", 2)] * TURNS, ("sleep", 2)]
        assert trainer._last_loaded_step == trainer.state.global_step
    finally:
        trainer.close()
