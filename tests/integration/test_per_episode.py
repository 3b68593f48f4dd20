"""Per-episode scheduling: the same episodes as lock-step, token by token, with episodes advancing on their own."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest
from test_rollout import INSPECT, SOLVE, _scripted, check_real_episodes

from arc_trl.data import render_messages
from arc_trl.tasks import load_task
from arc_trl.rollout import RolloutSettings, TrainerGenerator, run_episodes
from arc_trl.rollout.streams import stream_unsupported

BAD = "```python\nprint(undefined_name)\n```"


class ScriptedStream:
    """The scripted policy behind a request stream whose requests finish out of order: a request takes one
    `advance` per 8 tokens of its answer, so short turns come back (and re-enter) while long ones still run.
    The first turns of the `held` keys do not finish before some episode's later turn has been added (or 30 s have
    passed, so that a scheduler with a lock-step barrier fails the test rather than hanging it): advancing takes
    microseconds and a code run milliseconds, so without the hold the order would be up to the machine's load."""

    def __init__(self, gen, held=()):
        self.gen = gen
        self.held = set(held)
        self.opened = time.monotonic()
        self.running: dict[int, list] = {}  # key -> [advances left, ids, lps]
        self.log: list[tuple[str, int, int]] = []  # (event, key, pending requests at that moment)
        self.closed = False

    def add(self, key, token_ids, max_tokens):
        [ids], [lps] = self.gen.generate([token_ids], max_tokens)
        self.running[key] = [len(ids) // 8 + 1, ids, lps]
        self.log.append(("add", key, len(self.running)))

    def pending(self):
        return len(self.running)

    def advance(self):
        done = []
        later_turn_added = any(event == "add" for event, _, _ in self.log[len(self.gen.prompts):])
        for key, entry in list(self.running.items()):
            if key in self.held and not later_turn_added and time.monotonic() - self.opened < 30:
                continue
            entry[0] -= 1
            if entry[0] <= 0:
                del self.running[key]
                done.append((key, entry[1], entry[2]))
                self.log.append(("done", key, len(self.running)))
        return done

    def close(self):
        self.closed = True


def _streaming(gen, held=()):
    gen.streams = []

    def open_stream():
        gen.streams.append(ScriptedStream(gen, held))
        return gen.streams[-1]

    gen.open_stream = open_stream
    return gen


def _same_episodes(a, b):
    for x, y in zip(a, b, strict=True):
        assert x.prompt_ids == y.prompt_ids
        assert x.completion_ids == y.completion_ids
        assert x.env_mask == y.env_mask and x.logprobs == y.logprobs and x.turn_spans == y.turn_spans
        assert x.observations == y.observations and x.finish_reason == y.finish_reason
        assert x.outcome.to_dict() == y.outcome.to_dict()


def test_scripted_per_episode_matches_lockstep_token_by_token(tiny_tokenizer, pool):
    tasks = [load_task("arc-agi-1/train", i) for i in ("6150a2bd", "67a3c6ac", "68b16354", "74dd1130")]
    turns = [[INSPECT, SOLVE], [BAD, INSPECT, BAD], [SOLVE], [INSPECT, BAD, INSPECT]]
    prompts = [render_messages(t, "repl") for t in tasks]
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_completion_length=4096)
    lockstep = run_episodes(tasks, prompts, _scripted(tiny_tokenizer, tasks, turns), tiny_tokenizer, pool, settings)

    # The 3-turn episodes (1 and 3) hold their last code run until the one-turn episode (2) has been reported, so
    # the order asserted below does not depend on how fast the sandbox answers on a loaded machine.
    two_reported = threading.Event()
    finished_batches = []

    def report(eps):
        finished_batches.append([ep.index for ep in eps])
        if any(ep.index == 2 for ep in eps):
            two_reported.set()

    def held_last_turn(session):
        run_turn, calls = session.run_turn, []

        def run(text):
            calls.append(text)
            if len(calls) == 3:
                assert two_reported.wait(timeout=30), "the one-turn episode was not reported while others ran"
            return run_turn(text)

        session.run_turn = run
        return session

    sessions = []
    open_sessions = pool.open_sessions
    three_turn_tasks = {tasks[1].id, tasks[3].id}

    def opened(tasks_):
        for task, session in zip(tasks_, opened_ := open_sessions(tasks_)):
            sessions.append(held_last_turn(session) if task.id in three_turn_tasks else session)
        return opened_

    pool.open_sessions = opened
    try:
        gen = _streaming(_scripted(tiny_tokenizer, tasks, turns), held={2})
        per_episode = run_episodes(tasks, prompts, gen, tiny_tokenizer, pool,
                                   RolloutSettings(**{**vars(settings), "scheduling": "per_episode"}),
                                   on_finished=report)
    finally:
        del pool.open_sessions
    _same_episodes(per_episode, lockstep)
    assert [ep.finish_reason for ep in per_episode] == ["submitted", "max_turns", "submitted", "max_turns"]
    # every episode reported once, as it ended: the one-turn episode while the 3-turn ones still ran
    assert sorted(i for batch in finished_batches for i in batch) == [0, 1, 2, 3]
    batch_of = {i: n for n, batch in enumerate(finished_batches) for i in batch}
    assert batch_of[2] < batch_of[1] and batch_of[2] < batch_of[3]
    [stream] = gen.streams
    assert stream.closed and all(s.closed for s in sessions) and len(sessions) == 4
    # a later turn re-entered generation while a first turn (episode 2's) was still decoding: no lock-step barrier
    assert [event for event, _, _ in stream.log[:4]] == ["add"] * 4
    first_later_add = next(n for n, (event, _, _) in enumerate(stream.log) if n >= 4 and event == "add")
    assert next(n for n, (event, key, _) in enumerate(stream.log) if (event, key) == ("done", 2)) > first_later_add


def test_max_active_bounds_the_episodes_in_play_and_changes_no_episode(tiny_tokenizer, pool):
    """An evaluation of thousands of attempts in one call (`evaluate generate --rollout-scheduling per_episode`) must
    not hold a sandbox process per attempt: with `max_active` 2, at most 2 sessions are open and 2 requests in the
    engine at any moment, a new episode starts as one ends, and the episodes are the unbounded run's, token for
    token."""
    tasks = [load_task("arc-agi-1/train", i) for i in ("6150a2bd", "67a3c6ac", "68b16354", "74dd1130", "6150a2bd")]
    turns = [[INSPECT, SOLVE], [BAD, INSPECT, BAD], [SOLVE], [INSPECT, BAD, INSPECT], [SOLVE]]
    prompts = [render_messages(t, "repl") for t in tasks]
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_completion_length=4096, scheduling="per_episode")
    unbounded = run_episodes(tasks, prompts, _streaming(_scripted(tiny_tokenizer, tasks, turns)), tiny_tokenizer, pool,
                             settings)
    open_now, most = set(), [0]
    open_sessions, close_sessions = pool.open_sessions, pool.close_sessions

    def opened(tasks_):
        sessions = open_sessions(tasks_)
        open_now.update(map(id, sessions))
        most[0] = max(most[0], len(open_now))
        return sessions

    def closed(sessions):
        open_now.difference_update(map(id, sessions))
        return close_sessions(sessions)

    pool.open_sessions, pool.close_sessions = opened, closed
    try:
        gen = _streaming(_scripted(tiny_tokenizer, tasks, turns))
        bounded = run_episodes(tasks, prompts, gen, tiny_tokenizer, pool, settings, max_active=2)
    finally:
        del pool.open_sessions, pool.close_sessions
    _same_episodes(bounded, unbounded)
    [stream] = gen.streams
    assert most[0] == 2 and not open_now and max(pending for _, _, pending in stream.log) == 2
    assert [key for event, key, _ in stream.log if event == "add"][:2] == [0, 1]


def test_per_episode_closes_sessions_and_stream_on_errors(tiny_tokenizer, pool):
    task = load_task("arc-agi-1/train", "6150a2bd")
    gen = _streaming(_scripted(tiny_tokenizer, [task, task], [[INSPECT, SOLVE]] * 2))
    sessions = []
    open_sessions = pool.open_sessions
    pool.open_sessions = lambda tasks_: sessions.extend(open_sessions(tasks_)) or sessions[-len(tasks_):]

    def failing_turn(self, text):
        raise RuntimeError("sandbox exploded")

    from arc_trl.sandbox import Session

    original = Session.run_turn
    Session.run_turn = failing_turn
    try:
        with pytest.raises(RuntimeError, match="sandbox exploded"):
            run_episodes([task, task], [render_messages(task, "repl")] * 2, gen, tiny_tokenizer, pool,
                         RolloutSettings(max_turns=3, max_completion_length=4096, scheduling="per_episode"))
    finally:
        Session.run_turn = original
        del pool.open_sessions
    assert gen.streams[0].closed and len(sessions) == 2 and all(s.closed for s in sessions)


def test_generators_without_a_stream_fall_back_with_a_reason():
    eos = SimpleNamespace(eos_token_ids=[0])
    transformers_trainer = SimpleNamespace(use_vllm=False, **vars(eos))
    assert "continuous batching" in stream_unsupported(TrainerGenerator(transformers_trainer))
    tp_trainer = SimpleNamespace(use_vllm=True, vllm_generation=SimpleNamespace(mode="colocate", tensor_parallel_size=2),
                                 **vars(eos))
    assert "tensor_parallel_size=2" in stream_unsupported(TrainerGenerator(tp_trainer))
    server = SimpleNamespace(use_vllm=True, vllm_generation=SimpleNamespace(mode="server", tensor_parallel_size=1,
                                                                            structured_outputs_regex=None), **vars(eos))
    assert stream_unsupported(TrainerGenerator(server)) is None
    with pytest.raises(ValueError, match="rollout scheduling 'async'"):
        RolloutSettings(scheduling="async")


def test_transformers_falls_back_to_lockstep_token_by_token(memorized_model_dir, memorized_task, pool, caplog):
    """transformers `generate` has no continuous batching: per_episode plays lock-step, says so, same checks."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arc_trl.rollout import TransformersGenerator

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(memorized_model_dir)
    model = AutoModelForCausalLM.from_pretrained(memorized_model_dir).eval()
    gen = TransformersGenerator(model, tokenizer, [tokenizer.eos_token_id], batch_size=4, temperature=1.0)
    calls = []
    generate = gen.generate
    gen.generate = lambda seqs, cap, keys=None: calls.append(len(seqs)) or generate(seqs, cap)
    prompts = [render_messages(memorized_task, "repl")] * 3
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_tokens_per_turn=400, max_completion_length=1500,
                               scheduling="per_episode")
    with caplog.at_level(logging.WARNING, logger="arc_trl.rollout.per_episode"):
        episodes = run_episodes([memorized_task] * 3, prompts, gen, tokenizer, pool, settings)
    assert calls[0] == 3  # lock-step: the first turn of all episodes in one call
    check_real_episodes(episodes, prompts, tokenizer, memorized_model_dir)


# Episodes sampled from the memorised model on the shared vLLM engine. At temperature 1 about 81% of them SUBMIT (39 of
# 48 measured), and per-episode scheduling makes the engine's random stream depend on the sandbox's timing, so a test
# that needs one SUBMIT among 3 episodes fails about once in 150 runs (it did in a clean-clone `make test` on
# 2026-11-24); among 8, about once in 600,000.
SAMPLED_EPISODES = 8


@pytest.fixture(scope="module")
def memorized_llm(memorized_model_dir):
    """One CPU vLLM engine shared by this module's vLLM tests."""
    from vllm import LLM

    from arc_trl.integrations.vllm_cpu import make_cpu_weights_reloadable
    from model_helpers import shutdown_llm

    make_cpu_weights_reloadable()
    llm = LLM(model=str(memorized_model_dir), dtype="float32", max_model_len=4096, max_num_seqs=8, seed=0,
              logprobs_mode="processed_logprobs")
    yield llm
    shutdown_llm(llm)


@pytest.mark.vllm
@pytest.mark.parametrize("scheduling", ["lockstep", "per_episode"])
def test_vllm_engine_episodes_token_by_token(memorized_llm, memorized_model_dir, memorized_task, pool, scheduling):
    """Both schedulers on a standalone CPU vLLM engine (`VLLMGenerator`): multi-turn episodes with code, environment
    replies and SUBMIT, checked token by token against the chat template and a transformers forward."""
    from transformers import AutoTokenizer

    from arc_trl.rollout import VLLMGenerator

    tokenizer = AutoTokenizer.from_pretrained(memorized_model_dir)
    gen = VLLMGenerator(memorized_llm, [tokenizer.eos_token_id], temperature=1.0)
    prompts = [render_messages(memorized_task, "repl")] * SAMPLED_EPISODES
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_tokens_per_turn=400, max_completion_length=1500,
                               scheduling=scheduling)
    finished = []
    episodes = run_episodes([memorized_task] * SAMPLED_EPISODES, prompts, gen, tokenizer, pool, settings,
                            on_finished=lambda eps: finished.extend(ep.index for ep in eps))
    assert sorted(finished) == list(range(SAMPLED_EPISODES))
    assert memorized_llm.llm_engine.get_num_unfinished_requests() == 0
    check_real_episodes(episodes, prompts, tokenizer, memorized_model_dir)


@pytest.mark.vllm
def test_trainer_colocated_engine_per_episode_token_by_token(memorized_llm, memorized_model_dir, memorized_task,
                                                             pool):
    """`TrainerGenerator` on TRL's colocated engine (here the shared engine in a stand-in `vllm_generation`): the
    sampling settings are read from it, including a temporary per-turn cap, and episodes pass the same checks; a
    budget too small for the episodes truncates them at exactly the budget."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(memorized_model_dir)
    vg = SimpleNamespace(mode="colocate", tensor_parallel_size=1, structured_outputs_regex=None, llm=memorized_llm,
                         enable_sleep_mode=False, repetition_penalty=1.0, temperature=1.0, top_p=1.0, top_k=0,
                         min_p=0.0, logprobs=0, generation_kwargs={})
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=vg, eos_token_ids=[tokenizer.eos_token_id],
                              state=SimpleNamespace(global_step=0), _last_loaded_step=0)
    prompts = [render_messages(memorized_task, "repl")] * SAMPLED_EPISODES
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_tokens_per_turn=400, max_completion_length=1500,
                               scheduling="per_episode")
    episodes = run_episodes([memorized_task] * SAMPLED_EPISODES, prompts, TrainerGenerator(trainer), tokenizer, pool,
                            settings)
    check_real_episodes(episodes, prompts, tokenizer, memorized_model_dir)
    short = RolloutSettings(**{**vars(settings), "max_completion_length": 60})
    episodes = run_episodes([memorized_task] * 2, prompts[:2], TrainerGenerator(trainer), tokenizer, pool, short)
    assert [len(ep.completion_ids) for ep in episodes] == [60, 60]
    assert all(ep.finish_reason == "truncated" and all(ep.env_mask) for ep in episodes)


class ScriptedServerClient:
    """Stands in for TRL's `VLLMClient` in server mode: `generate` answers one prompt with the scripted policy in
    the client's reply format, slower for longer answers (requests run concurrently, in threads)."""

    def __init__(self, gen):
        self.gen = gen
        self.calls = []

    def generate(self, prompts, max_tokens, **sampling):
        self.calls.append(sampling)
        [ids], [lps] = self.gen.generate(prompts, max_tokens)
        time.sleep(len(ids) / 2000)
        return {"prompt_ids": prompts, "completion_ids": [ids], "logprobs": [[[lp] for lp in lps]]}


def test_server_mode_per_episode_matches_lockstep(tiny_tokenizer, pool):
    """Server mode: concurrent single-prompt requests through the trainer's vLLM client settings give the lock-step
    episodes, token by token, and carry TRL's sampling settings."""
    tasks = [load_task("arc-agi-1/train", i) for i in ("6150a2bd", "67a3c6ac", "68b16354")]
    turns = [[INSPECT, SOLVE], [BAD, INSPECT, BAD], [SOLVE]]
    prompts = [render_messages(t, "repl") for t in tasks]
    settings = RolloutSettings(agent_mode="repl", max_turns=3, max_completion_length=4096)
    lockstep = run_episodes(tasks, prompts, _scripted(tiny_tokenizer, tasks, turns), tiny_tokenizer, pool, settings)
    vg = SimpleNamespace(mode="server", tensor_parallel_size=1, structured_outputs_regex=None, repetition_penalty=1.0,
                         temperature=0.7, top_p=1.0, top_k=0, min_p=None, logprobs=0, generation_kwargs={"seed": 3})
    client = ScriptedServerClient(_scripted(tiny_tokenizer, tasks, turns))
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=vg, eos_token_ids=[tiny_tokenizer.eos_token_id],
                              state=SimpleNamespace(global_step=0), _last_loaded_step=0, _arc_stream_clients=[client],
                              accelerator=SimpleNamespace(process_index=0))
    episodes = run_episodes(tasks, prompts, TrainerGenerator(trainer), tiny_tokenizer, pool,
                            RolloutSettings(**{**vars(settings), "scheduling": "per_episode"}))
    _same_episodes(episodes, lockstep)
    assert len(client.calls) == 6
    assert all(c["temperature"] == 0.7 and c["min_p"] == 0.0 and c["generation_kwargs"] == {"seed": 3}
               and c["n"] == 1 and c["logprobs"] == 0 for c in client.calls)


def test_server_stream_keeps_missing_sampler_logprobs_nan():
    """A position the server gave no log-prob for stays NaN (TRL neutralises NaN in its IS correction; 0.0 would
    claim the sampler was certain), as in the lock-step generators."""
    import math

    from arc_trl.rollout.streams import ServerStream

    class Client:
        def generate(self, prompts, max_tokens, **sampling):
            return {"completion_ids": [[7, 8, 9]], "logprobs": [[[-0.5], [None], []]]}

    stream = ServerStream(Client(), {})
    stream.add(0, [1, 2], 3)
    finished = []
    deadline = time.time() + 10
    while not finished and time.time() < deadline:
        finished = stream.advance()
    stream.close()
    [(key, ids, lps)] = finished
    assert key == 0 and ids == [7, 8, 9]
    assert lps[0] == -0.5 and math.isnan(lps[1]) and math.isnan(lps[2])


def test_server_logprobs_are_the_sampled_tokens_not_the_top_ranked():
    """The server lists each position's log-probs sorted by value, the sampled token among them (with logprobs=N
    it need not be first): its own value is taken, found by id, and NaN where the server gave none."""
    import math

    from arc_trl.rollout.streams import sampled_server_logprobs

    reply = {"completion_ids": [[7, 8, 9]], "logprobs": [[[-0.1, -2.0], [-0.3], [-0.2]]],
             "logprob_token_ids": [[[5, 7], [8], [4]]]}
    lps = sampled_server_logprobs(reply, [7, 8, 9])
    assert lps[:2] == [-2.0, -0.3] and math.isnan(lps[2])  # 9 is not among the listed ids
    assert sampled_server_logprobs({"completion_ids": [[7]], "logprobs": None}, [7]) is None


def test_a_process_without_episodes_still_joins_the_steps_weight_sync():
    """The weight sync is collective (ZeRO-3 gathers, every process walks the weights): a process whose episodes have
    all ended sends no request, but must not skip the sync the others enter at a new step."""
    synced = []
    vg = SimpleNamespace(mode="server", tensor_parallel_size=1, structured_outputs_regex=None,
                         sync_weights=lambda: synced.append(1))
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=vg, eos_token_ids=[2], arc_config=None,
                              state=SimpleNamespace(global_step=5), _last_loaded_step=4)
    ids, lps = TrainerGenerator(trainer).generate([[1, 2, 3]], 16, keys=[])  # run_episodes' dummy request
    assert (ids, lps) == ([], []) and synced == [1] and trainer._last_loaded_step == 5
