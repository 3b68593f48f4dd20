"""Server mode through real HTTP: each process's own requests, each episode pinned to one data-parallel engine.

A stand-in vLLM server on loopback answers TRL's `VLLMClient` (health, models, server info with two data-parallel
engines, completions) and records the `X-data-parallel-rank` header of every completion request. A lock-step rollout
through `TrainerGenerator` in server mode must send one request per episode and turn, every turn of an episode to
the same engine, the episodes spread evenly over the engines.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from fake_vllm_server import FakeVllmServer

pytest.importorskip("vllm")  # TRL's VLLMClient needs vLLM installed

from arc_trl.data import render_messages  # noqa: E402
from arc_trl.rollout import RolloutSettings, TrainerGenerator, run_episodes  # noqa: E402
from arc_trl.tasks import load_task  # noqa: E402

CODE = "```python\nprint(len(train_inputs))\n```"  # runs, submits nothing: every episode plays all its turns
TASKS = ("6150a2bd", "67a3c6ac", "68b16354", "74dd1130", "9dfd6313")
TURNS = 3


@pytest.fixture
def server(tiny_tokenizer):
    from arc_trl.chat_template import end_of_turn_id

    eos = [tiny_tokenizer.eos_token_id]
    reply = tiny_tokenizer(CODE, add_special_tokens=False)["input_ids"] + [end_of_turn_id(tiny_tokenizer, eos)]
    fake = FakeVllmServer(reply, engines=2)
    thread = threading.Thread(target=fake.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


def _server_trainer(url: str, tokenizer, process_index: int = 0):
    vg = SimpleNamespace(mode="server", tensor_parallel_size=1, structured_outputs_regex=None, repetition_penalty=1.0,
                         temperature=1.0, top_p=1.0, top_k=0, min_p=None, logprobs=0, generation_kwargs={},
                         server_base_url=url, server_timeout=10.0, max_completion_length=64)
    return SimpleNamespace(use_vllm=True, vllm_generation=vg, eos_token_ids=[tokenizer.eos_token_id],
                           state=SimpleNamespace(global_step=0), _last_loaded_step=0,
                           accelerator=SimpleNamespace(process_index=process_index, num_processes=1),
                           generation_config=None, generation_kwargs={})


def test_lockstep_server_turns_pin_each_episode_to_one_engine(server, tiny_tokenizer, pool):
    tasks = [load_task("arc-agi-1/train", i) for i in TASKS]
    prompts = [render_messages(t, "repl") for t in tasks]
    settings = RolloutSettings(agent_mode="repl", max_turns=TURNS, max_tokens_per_turn=64, max_completion_length=4096)
    episodes = run_episodes(tasks, prompts, TrainerGenerator(_server_trainer(server.url, tiny_tokenizer)),
                            tiny_tokenizer, pool, settings)
    assert [len(ep.assistant_texts) for ep in episodes] == [TURNS] * len(TASKS)
    assert len(server.requests) == TURNS * len(TASKS)  # one single-prompt request per episode and turn, no padding

    def episode_of(prompt: list[int]) -> int:
        [index] = [ep.index for ep in episodes if prompt == (ep.prompt_ids + ep.completion_ids)[: len(prompt)]]
        return index

    engines: dict[int, set[int | None]] = {}
    for engine, prompt in server.requests:
        engines.setdefault(episode_of(prompt), set()).add(engine)
    assert all(len(seen) == 1 for seen in engines.values()), engines  # every turn of an episode on one engine
    per_engine = [sum(seen == {e} for seen in engines.values()) for e in (0, 1)]
    assert sorted(per_engine) == [2, 3]  # 5 episodes spread evenly over 2 engines
    assert {index: seen.pop() for index, seen in engines.items()} == {
        ep.index: ep.index % 2 for ep in episodes}  # engine = (key + process index) % engines, process 0


def test_a_second_process_offsets_its_engines(server, tiny_tokenizer, pool):
    """Process 1's episode 0 goes to engine 1: two processes with one episode each don't both load engine 0."""
    task = load_task("arc-agi-1/train", TASKS[0])
    settings = RolloutSettings(agent_mode="repl", max_turns=1, max_tokens_per_turn=64, max_completion_length=4096)
    run_episodes([task], [render_messages(task, "repl")],
                 TrainerGenerator(_server_trainer(server.url, tiny_tokenizer, process_index=1)),
                 tiny_tokenizer, pool, settings)
    assert [engine for engine, _ in server.requests] == [1]
