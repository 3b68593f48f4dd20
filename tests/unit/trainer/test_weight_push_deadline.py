"""The weight push's NCCL broadcast within a deadline (`arc_trl.integrations.vllm_server_client.broadcast_deadline`): a server
that stops taking it gets its communicator aborted and the push fails naming the server, in bounded time; a broadcast
that an abort does not free ends the process. On CPU, with a stand-in communicator that blocks like a collective whose
peer stopped."""

from __future__ import annotations

import threading
import time

import pytest

from arc_trl.integrations.vllm_server_client import ServerUnresponsive, bounded_client_class, broadcast_deadline


class StoppedPeer:
    """A communicator whose broadcast waits for a peer that never comes. `ncclCommAbort` frees it (`abort`:
    "frees"), frees it but returns only `slow_s` later ("slow"), or hangs until the test ends ("hangs"); "none": the
    communicator has no NCCL handle to abort."""

    def __init__(self, abort: str = "frees", slow_s: float = 0.3) -> None:
        self.freed, self.release = threading.Event(), threading.Event()
        self.aborts = 0
        self.disabled = False
        self.disabled_at_abort: bool | None = None
        self.comm = object()
        self.nccl = None if abort == "none" else self
        self.mode, self.slow_s = abort, slow_s

    def ncclCommAbort(self, comm) -> None:  # noqa: N802  vLLM's binding name
        assert comm is self.comm
        self.aborts += 1
        self.disabled_at_abort = self.disabled
        if self.mode == "hangs":
            self.release.wait(30.0)
            return
        self.freed.set()
        if self.mode == "slow":
            time.sleep(self.slow_s)

    def broadcast(self, limit_s: float = 30.0) -> None:
        if not self.freed.wait(limit_s):
            raise AssertionError("the broadcast was never freed")


class Client:
    base_url = "http://127.0.0.1:8123"

    def __init__(self, communicator) -> None:
        self.communicator = communicator


class Exits(list):
    """`exit_process` that records its code and frees the blocked broadcast (the process would end there)."""

    def __init__(self, peer: StoppedPeer | None = None) -> None:
        super().__init__()
        self.peer = peer

    def __call__(self, code: int) -> None:
        self.append(code)
        if self.peer is not None:
            self.peer.freed.set()


def test_a_push_the_server_does_not_take_is_aborted_and_fails_naming_the_server():
    peer = StoppedPeer()
    client, exits = Client(peer), Exits()
    started = time.monotonic()
    with pytest.raises(ServerUnresponsive) as error, broadcast_deadline(client, 0.3, grace_s=5.0,
                                                                          exit_process=exits):
        peer.broadcast()
    took = time.monotonic() - started
    assert peer.aborts == 1 and exits == []
    assert 0.3 <= took < 0.3 + 2.0  # the deadline, plus a thread's wake-up on a loaded 2-core machine
    message = str(error.value)
    assert "http://127.0.0.1:8123 did not take the weight push within 0.3 s (vllm_request_timeout_s)" in message
    assert "was aborted" in message and "its log:" in message


def test_the_communicator_is_disabled_before_its_abort_and_dropped_from_the_client():
    """After `ncclCommAbort`, vLLM's packed send loop would go on broadcasting on the freed communicator unless
    `disabled` (its broadcast then returns at once); the client never uses it again."""
    peer = StoppedPeer()
    client = Client(peer)
    with pytest.raises(ServerUnresponsive), broadcast_deadline(client, 0.2, grace_s=5.0, exit_process=Exits()):
        peer.broadcast()
    assert peer.disabled_at_abort is True and client.communicator is None


def test_a_push_freed_while_the_abort_is_still_returning_fails():
    """The race: the abort frees the broadcast, the push returns before the abort call does; the push went to an
    aborted communicator, so it must fail, not pass as a success."""
    peer = StoppedPeer("slow", slow_s=0.5)
    client = Client(peer)
    with pytest.raises(ServerUnresponsive, match="was aborted"), broadcast_deadline(
            client, 0.2, grace_s=5.0, exit_process=Exits()):
        peer.broadcast()
    assert peer.aborts == 1


def test_a_broadcast_the_abort_does_not_free_ends_the_process():
    peer = StoppedPeer("none")
    client, exits = Client(peer), Exits(peer)
    started = time.monotonic()
    with pytest.raises(ServerUnresponsive, match="could not be aborted"), broadcast_deadline(
            client, 0.2, grace_s=0.3, exit_process=exits):
        peer.broadcast()
    assert exits == [1] and time.monotonic() - started >= 0.5  # deadline + grace, not before


def test_an_abort_that_hangs_still_ends_the_process_after_the_grace(capsys):
    peer = StoppedPeer("hangs")
    client, exits = Client(peer), Exits(peer)
    started = time.monotonic()
    try:
        with pytest.raises(ServerUnresponsive), broadcast_deadline(client, 0.2, grace_s=0.3, exit_process=exits):
            peer.broadcast()
        took = time.monotonic() - started
    finally:
        peer.release.set()
    assert exits == [1] and peer.aborts == 1
    assert 0.5 <= took < 0.5 + 2.0  # deadline + grace (the hung abort does not hold the exit back)
    assert "did not return from its abort" in capsys.readouterr().err


def test_a_push_within_its_deadline_is_left_alone():
    peer = StoppedPeer()
    client, exits = Client(peer), Exits()
    with broadcast_deadline(client, 0.2, grace_s=0.2, exit_process=exits):
        peer.freed.set()
        peer.broadcast()
    time.sleep(0.6)  # past the deadline and the grace: the watchdog stood down
    assert peer.aborts == 0 and exits == [] and client.communicator is peer and not peer.disabled


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
