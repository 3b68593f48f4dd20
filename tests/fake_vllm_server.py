"""A stand-in vLLM server on loopback for TRL's `VLLMClient` (no GPU, no vLLM engine): health, models, server info
with `engines` data-parallel engines, and completions that answer `reply_ids` (cut to `max_tokens`) with log-prob
-0.5 per token. Each completion request is recorded (`requests`: engine header, prompt ids); `on_request(prompt)` is
called as it arrives, then the reply waits `delay_s` (a request in flight for that long: `active` counts them). Any
other POST goes to `on_post(path, body)`, whose dict is the JSON reply (None: 404): a test's own endpoints.
`hang_after=N`: after N requests to `hang_on` (completions by default) it stops answering anything (a hung or
SIGSTOPped server: connections are still accepted), until `resume` is set, when the requests held close unanswered. Used by tests/integration/test_server_engines.py, test_async_rollouts.py and test_async_rollouts_processes.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeVllmServer(ThreadingHTTPServer):
    """The endpoints `VLLMClient` reads, with `engines` data-parallel engines; completions answer `reply_ids`."""

    daemon_threads = True

    def __init__(self, reply_ids: list[int], engines: int, delay_s: float = 0.0,
                 on_request: Callable[[list[int]], None] | None = None, hang_after: int | None = None,
                 hang_on: str = "/v1/completions") -> None:
        self.reply_ids, self.engines, self.delay_s, self.on_request = reply_ids, engines, delay_s, on_request
        self.hang_after, self.hang_on = hang_after, hang_on  # requests to hang_on answered before it stops answering
        self.counts: dict[str, int] = {}  # POST requests received, by path
        self.hung = threading.Event()  # set when it stopped answering
        self.hung_at: float | None = None  # time.monotonic() then
        self.resume = threading.Event()  # set by the test: the requests held end (unanswered)
        self.held = 0  # requests that arrived once it had stopped answering
        self.completions = 0  # completion requests received
        self.on_post: Callable[[str, dict], dict | None] | None = None  # other POST paths (a test's endpoints)
        self.requests: list[tuple[int | None, list[int]]] = []  # (engine header, prompt ids) per completion request
        self.active = 0  # completion requests being answered now
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

    def _held(self) -> bool:
        """True when the server has stopped answering: the request is held until `resume`, then dropped."""
        server: FakeVllmServer = self.server  # type: ignore[assignment]
        if not server.hung.is_set():
            return False
        with server.lock:
            server.held += 1
        server.resume.wait()
        self.close_connection = True
        return True

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        server: FakeVllmServer = self.server  # type: ignore[assignment]
        if self._held():
            return
        if self.path.startswith("/health"):
            self._send({})
        elif self.path.startswith("/v1/models"):
            self._send({"data": [{"id": "stand-in"}]})
        elif self.path.startswith("/server_info"):
            self._send({"vllm_config": {"parallel_config": {"data_parallel_size": server.engines},
                                        "model_config": {"logprobs_mode": "processed_logprobs"}}})
        else:
            self.send_error(404)

    def do_POST(self) -> None:  # noqa: N802
        server: FakeVllmServer = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        with server.lock:
            count = server.counts[self.path] = server.counts.get(self.path, 0) + 1
            if self.path.startswith("/v1/completions"):
                server.completions += 1
            if (self.path.startswith(server.hang_on) and server.hang_after is not None and count > server.hang_after
                    and not server.hung.is_set()):
                server.hung_at = time.monotonic()
                server.hung.set()
        if self._held():
            return
        if not self.path.startswith("/v1/completions"):
            reply = server.on_post(self.path, body) if server.on_post is not None else None
            if reply is None:
                self.send_error(404)
            else:
                self._send(reply)
            return
        header = self.headers.get("X-data-parallel-rank")
        reply = server.reply_ids[: body["max_tokens"]]
        choices = []
        with server.lock:
            server.active += 1
        try:
            for prompt in body["prompt"]:
                with server.lock:
                    server.requests.append((None if header is None else int(header), list(prompt)))
                if server.on_request is not None:
                    server.on_request(list(prompt))
                logprobs = {"tokens": [f"token_id:{t}" for t in reply], "token_logprobs": [-0.5] * len(reply),
                            "top_logprobs": [None] * len(reply)}
                choices.append({"prompt_token_ids": prompt, "token_ids": reply, "logprobs": logprobs})
            time.sleep(server.delay_s)
        finally:
            with server.lock:
                server.active -= 1
        self._send({"choices": choices})
