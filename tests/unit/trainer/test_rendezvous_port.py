"""`claim_rendezvous_port` (arc_trl/integrations/colocated_engine.py): a single-process colocated run without MASTER_PORT takes an
OS-assigned free port, not TRL's first free of 29500, 23456, ..., which runs started together all take (seen on an
H200: 7 of 12 runs started together died with EADDRINUSE on 29500)."""

from __future__ import annotations

import datetime
import errno
import os
import socket

import torch.distributed as dist
from trl.trainer.utils import ensure_master_addr_port

import pytest

from arc_trl.integrations.colocated_engine import claim_rendezvous_port, release_rendezvous_port, rendezvous_port_held


@pytest.fixture(autouse=True)
def released():
    yield
    release_rendezvous_port()

TRL_CANDIDATES = {29500, 23456, 12355, 12345}


def test_trls_choice_gives_runs_started_together_the_same_port(monkeypatch):
    """The race itself: each run tests the port, finds it free (no run has bound it yet) and takes it."""
    ports = set()
    for _ in range(2):  # two runs, each in a fresh environment, before either binds its store
        monkeypatch.delenv("MASTER_PORT", raising=False)
        ensure_master_addr_port()
        ports.add(int(os.environ["MASTER_PORT"]))
    assert len(ports) == 1


def test_the_claimed_port_is_held_until_the_store_has_bound_it(monkeypatch):
    """Between the claim and the engine's store there is model loading: a port closed at once was free again for
    another run's draw (bind to port 0) or for an outgoing connection. Held, no one else can bind it, and no draw
    gives it, yet torch's store (SO_REUSEADDR) binds it; it is released once the engine is built."""
    monkeypatch.delenv("MASTER_PORT", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with rendezvous_port_held():
        port = claim_rendezvous_port()
        with socket.socket() as other:
            try:
                other.bind(("", port))
                taken = None
            except OSError as error:
                taken = error.errno
        assert taken == errno.EADDRINUSE  # old code: bound by the other process, the store would then fail
        draws = set()
        for _ in range(500):  # another run's claims
            with socket.socket() as draw:
                draw.bind(("", 0))
                draws.add(draw.getsockname()[1])
        assert port not in draws
        store = dist.TCPStore("127.0.0.1", port, 1, True, timeout=datetime.timedelta(seconds=10))
        store.set("k", "v")
        assert store.get("k") == b"v"
        del store
    with socket.socket() as after:  # released: free for anyone
        after.bind(("", port))


def test_runs_get_ports_the_kernel_assigned_while_one_is_bound(monkeypatch):
    monkeypatch.delenv("MASTER_PORT", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    first = claim_rendezvous_port()
    release_rendezvous_port()
    assert first is not None and first not in TRL_CANDIDATES
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as store:  # the first run's store holds its port
        store.bind(("", first))
        monkeypatch.delenv("MASTER_PORT")
        second = claim_rendezvous_port()
        assert second not in (first, None) and os.environ["MASTER_PORT"] == str(second)
        # and TRL then keeps it: ensure_master_addr_port respects a set MASTER_PORT
        ensure_master_addr_port()
        assert os.environ["MASTER_PORT"] == str(second)


def test_a_set_port_or_a_launched_process_group_is_left_alone(monkeypatch):
    monkeypatch.setenv("MASTER_PORT", "29517")
    assert claim_rendezvous_port() is None and os.environ["MASTER_PORT"] == "29517"
    monkeypatch.delenv("MASTER_PORT")
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun / accelerate: every rank must use the launcher's one port
    assert claim_rendezvous_port() is None and "MASTER_PORT" not in os.environ


def test_trls_pick_one_values_are_claimed_and_an_empty_world_size_is_one_process(monkeypatch):
    for value in ("0", "auto", " "):  # TRL resolves 0 and auto to its candidates again: the race
        monkeypatch.setenv("MASTER_PORT", value)
        monkeypatch.setenv("WORLD_SIZE", "")
        port = claim_rendezvous_port()
        assert port is not None and port not in TRL_CANDIDATES and os.environ["MASTER_PORT"] == str(port)
    monkeypatch.setenv("MASTER_PORT", "")
    monkeypatch.setenv("WORLD_SIZE", "two")  # not ours to judge (torch says what is wrong with it)
    assert claim_rendezvous_port() is None
