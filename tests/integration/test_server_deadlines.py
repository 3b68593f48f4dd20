"""Deadlines on every request to a vLLM server (arc_trl/integrations/vllm_server_client.py): a server that stops answering fails
the request after `vllm_request_timeout_s`, once (never resent), with the server, the request, the key and the
server's log named; a server that never comes up fails the start-up wait. Against the stand-in server
(tests/fake_vllm_server.py) and a socket that accepts connections and never answers. The whole run with a server that
stops answering: tests/integration/test_hung_server.py."""

from __future__ import annotations

import json
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from fake_vllm_server import FakeVllmServer

pytest.importorskip("vllm")  # TRL's VLLMClient needs vLLM installed

from arc_trl.integrations.vllm_server_client import (  # noqa: E402
    SERVER_LOGS_ENV,
    ServerUnresponsive,
    bounded_client,
    server_log,
)


@pytest.fixture
def server():
    fake = FakeVllmServer([5, 6, 7], engines=1, hang_after=0)  # answers /health, /v1/models, /server_info; no completion
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    yield fake
    fake.resume.set()
    fake.shutdown()
    fake.server_close()


def test_a_request_the_server_never_answers_fails_once_after_its_deadline_naming_server_and_log(server, tmp_path,
                                                                                              monkeypatch):
    port = server.server_address[1]
    log = tmp_path / "student-vllm.log"
    monkeypatch.setenv(SERVER_LOGS_ENV, json.dumps({f"http://localhost:{port}": str(log)}))  # the host's alias
    client = bounded_client(server.url, timeout_s=1.0)
    start = time.monotonic()
    with pytest.raises(ServerUnresponsive) as error:
        client.generate(prompts=[[1, 2, 3]], max_tokens=3)
    elapsed = time.monotonic() - start
    assert str(error.value) == (f"vLLM server {server.url} did not answer POST /v1/completions within 1 s "
                                f"(vllm_request_timeout_s): Read timed out; its log: {log}")
    assert 1.0 <= elapsed < 1.0 + 1.0  # one deadline, no resend: TRL's urllib3 Retry(read=5) sends it 6 times
    assert server.held == 1 and server.counts == {"/v1/completions": 1}


def test_the_weight_push_and_an_error_answer_name_the_server(server):
    client = bounded_client(server.url, timeout_s=1.0)
    server.hang_after = None  # answers everything now; the push endpoints are not served: HTTP 404
    with pytest.raises(RuntimeError, match=rf"vLLM server {server.url} answered POST /start_weight_update with HTTP "
                                           r"404: .*its log: not known to the trainer"):
        client._start_weight_update()
    server.hang_on, server.hang_after = "/start_weight_update", 0  # the push's next request is never answered
    with pytest.raises(ServerUnresponsive, match="did not answer POST /start_weight_update within 1 s"):
        client._start_weight_update()


@pytest.mark.parametrize("listening", [True, False])
def test_a_server_that_never_comes_up_fails_the_start_up_wait(listening):
    """Nothing listening (refused), or a socket that accepts and never answers (TRL's `requests.get` of /health
    has no timeout: it waited forever there)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        if listening:
            listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        start = time.monotonic()
        why = "Read timed out" if listening else r"\[Errno 111\] Connection refused"
        with pytest.raises(ServerUnresponsive, match=rf"vLLM server {url} not healthy within 2 s \({url}/health: "
                                                     rf"{why}\); its log: not known"):
            bounded_client(url, timeout_s=30.0, connection_timeout_s=2.0)
        assert time.monotonic() - start < 2.0 + 1.5  # the start-up wait, one poll interval over at most


def test_server_log_matches_the_port_and_local_host_aliases(monkeypatch):
    monkeypatch.setenv(SERVER_LOGS_ENV, json.dumps({"http://127.0.0.1:8000": "/a.log", "http://10.0.0.2:8001": "/b"}))
    assert server_log("http://0.0.0.0:8000") == server_log("http://localhost:8000") == "/a.log"
    assert server_log("http://10.0.0.2:8001/v1") == "/b" and server_log("http://127.0.0.1:8001") is None
    monkeypatch.setenv(SERVER_LOGS_ENV, "not json")
    assert server_log("http://127.0.0.1:8000") is None


def test_the_trainers_clients_take_vllm_request_timeout_s(server, monkeypatch):
    """TRL's own client (built by the name `VLLMClient` of its module inside `GRPOTrainer.__init__`) and the
    per-request clients of the rollout both get the deadline."""
    import trl.generation.vllm_generation as vllm_generation

    from arc_trl.integrations.trl_internals import bounded_server_client, stream_clients

    original = vllm_generation.VLLMClient
    with bounded_server_client(1.5):
        client = vllm_generation.VLLMClient(base_url=server.url, connection_timeout=5.0)
    assert vllm_generation.VLLMClient is original and client.request_timeout_s == 1.5
    assert client.session.adapters["http://"].max_retries.read == 0  # TRL's Retry(read=5) less its resends
    trainer = SimpleNamespace(arc_config=SimpleNamespace(vllm_request_timeout_s=2.5), vllm_generation=SimpleNamespace(
        server_base_url=server.url, server_host=None, server_port=None, server_timeout=5.0))
    [stream] = stream_clients(trainer)
    assert stream.request_timeout_s == 2.5 and stream.session.adapters["http://"]._pool_maxsize == 256


def test_vllm_request_timeout_s_must_be_positive_and_is_read_in_server_mode_only(caplog):
    from arc_trl.config import ArcConfig
    from arc_trl.config.ineffective_keys import ineffective_keys

    with pytest.raises(ValueError, match="vllm_request_timeout_s must be > 0"):
        ArcConfig(vllm_request_timeout_s=0)
    defaults = {"vllm_request_timeout_s": 300.0, "use_vllm": False, "vllm_mode": "colocate", "teacher_privileged":
                "none", "peer_min_reward": None, "peer_max_chars": 4000, "vllm_rollout_dtype": "bf16",
                "vllm_kv_cache_dtype": "auto", "vllm_kv_cache_memory_gib": None}
    assert ineffective_keys({"vllm_request_timeout_s": 30.0, "use_vllm": True, "vllm_mode": "server"}, defaults) == []
    [message] = ineffective_keys({"vllm_request_timeout_s": 30.0, "use_vllm": True}, defaults)
    assert message.startswith("vllm_request_timeout_s=30.0 has no effect: it bounds the requests to a vLLM server")
