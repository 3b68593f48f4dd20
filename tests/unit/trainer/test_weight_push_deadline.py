"""The weight push's NCCL broadcast within a deadline (`arc_trl.vllm_server_client.broadcast_deadline`): a server
that stops taking it gets its communicator aborted and the push fails naming the server, in bounded time; a broadcast
that an abort does not free ends the process. On CPU, with a stand-in communicator that blocks like a collective whose
peer stopped."""

from __future__ import annotations

import threading
import time

import pytest

from arc_trl.vllm_server_client import ServerUnresponsive, bounded_client_class, broadcast_deadline


class StoppedPeer:
    """A communicator whose broadcast waits for a peer that never comes; `ncclCommAbort` frees it (if `abortable`)."""

    def __init__(self, abortable: bool = True) -> None:
        self.freed = threading.Event()
        self.aborts = 0
        self.comm = object()
        self.nccl = self if abortable else None

    def ncclCommAbort(self, comm) -> None:  # noqa: N802  vLLM's binding name
        assert comm is self.comm
        self.aborts += 1
        self.freed.set()

    def broadcast(self, limit_s: float = 30.0) -> None:
        if not self.freed.wait(limit_s):
            raise AssertionError("the broadcast was never freed")


class Client:
    base_url = "http://127.0.0.1:8123"

    def __init__(self, communicator) -> None:
        self.communicator = communicator


def test_a_push_the_server_does_not_take_is_aborted_and_fails_naming_the_server():
    client = Client(StoppedPeer())
    started = time.monotonic()
    with pytest.raises(ServerUnresponsive) as error, broadcast_deadline(client, 0.3, grace_s=5.0,
                                                                          exit=pytest.fail):
        client.communicator.broadcast()
    took = time.monotonic() - started
    assert client.communicator.aborts == 1
    assert 0.3 <= took < 0.3 + 2.0  # the deadline, plus a thread's wake-up on a loaded 2-core machine
    message = str(error.value)
    assert "http://127.0.0.1:8123 did not take the weight push within 0.3 s (vllm_request_timeout_s)" in message
    assert "was aborted" in message and "its log:" in message


def test_a_broadcast_the_abort_does_not_free_ends_the_process():
    client = Client(StoppedPeer(abortable=False))
    exits: list[int] = []

    def exit(code: int) -> None:  # the process would end here: free the broadcast so that the test goes on
        exits.append(code)
        client.communicator.freed.set()

    started = time.monotonic()
    with pytest.raises(ServerUnresponsive, match="could not be aborted"), broadcast_deadline(
            client, 0.2, grace_s=0.3, exit=exit):
        client.communicator.broadcast()
    assert exits == [1] and time.monotonic() - started >= 0.5  # deadline + grace, not before


def test_a_push_within_its_deadline_is_left_alone():
    client = Client(StoppedPeer())
    with broadcast_deadline(client, 5.0, exit=pytest.fail):
        client.communicator.freed.set()
        client.communicator.broadcast()
    time.sleep(0.05)
    assert client.communicator.aborts == 0


def test_the_trainers_client_pushes_weights_under_the_deadline(monkeypatch):
    """TRL's `VLLMClient.update_named_params` (announce + broadcast) runs inside the deadline of the trainer's client."""
    from trl.generation.vllm_client import VLLMClient

    peer = StoppedPeer()
    monkeypatch.setattr(VLLMClient, "update_named_params", lambda self, metadata, params: peer.broadcast())
    cls = bounded_client_class(0.3)
    client = object.__new__(cls)  # no server to connect to: only the push is exercised
    client.base_url, client.communicator = "http://127.0.0.1:8124", peer
    with pytest.raises(ServerUnresponsive, match="127.0.0.1:8124 did not take the weight push within 0.3 s"):
        client.update_named_params([("w", "bfloat16", [1])], iter([]))
    assert peer.aborts == 1
