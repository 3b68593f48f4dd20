"""Server mode through real HTTP: each process's own requests, each episode pinned to one data-parallel engine.

A stand-in vLLM server on loopback answers TRL's `VLLMClient` (health, models, server info with two data-parallel
engines, completions) and records the `X-data-parallel-rank` header of every completion request. A lock-step rollout
through `TrainerGenerator` in server mode must send one request per episode and turn, every turn of an episode to
the same engine, the episodes spread evenly over the engines.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

pytest.importorskip("vllm")  # TRL's VLLMClient needs vLLM installed

from arc_trl.data import render_messages  # noqa: E402
from arc_trl.rollout import RolloutSettings, TrainerGenerator, run_episodes  # noqa: E402
from arc_trl.tasks import load_task  # noqa: E402

CODE = "```python\nprint(len(train_inputs))\n```"  # runs, submits nothing: every episode plays all its turns
TASKS = ("6150a2bd", "67a3c6ac", "68b16354", "74dd1130", "9dfd6313")
TURNS = 3


class FakeVllmServer(ThreadingHTTPServer):
    """The endpoints `VLLMClient` reads, with `engines` data-parallel engines; completions answer `reply_ids`."""

    def __init__(self, reply_ids: list[int], engines: int) -> None:
        self.reply_ids, self.engines = reply_ids, engines
        self.requests: list[tuple[int | None, list[int]]] = []  # (engine header, prompt ids) per completion request
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        server: FakeVllmServer = self.server  # type: ignore[assignment]
        if self.path.startswith("/health"):
            self._send({})
        elif self.path.startswith("/v1/models"):
            self._send({"data": [{"id": "stand-in"}]})
        elif self.path.startswith("/server_info"):
            self._send({"vllm_config": {"parallel_config": {"data_parallel_size": server.engines}}})
        else:
            self.send_error(404)

    def do_POST(self) -> None:  # noqa: N802
        server: FakeVllmServer = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.startswith("/v1/completions"):
            self.send_error(404)
            return
        header = self.headers.get("X-data-parallel-rank")
        reply = server.reply_ids[: body["max_tokens"]]
        choices = []
        for prompt in body["prompt"]:
            with server.lock:
                server.requests.append((None if header is None else int(header), list(prompt)))
            logprobs = {"tokens": [f"token_id:{t}" for t in reply], "token_logprobs": [-0.5] * len(reply),
                        "top_logprobs": [None] * len(reply)}
            choices.append({"prompt_token_ids": prompt, "token_ids": reply, "logprobs": logprobs})
        self._send({"choices": choices})


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
