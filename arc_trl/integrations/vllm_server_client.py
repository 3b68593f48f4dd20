"""Deadlines on every request to a vLLM server: TRL's `VLLMClient` with each HTTP request bounded, and a server that
does not answer named in the error, with its log.

TRL's `VLLMClient` sends its requests (generation, the weight push's `start_weight_update` / `update_weights` /
`finish_weight_update`, `/health`, `/server_info`) without a timeout, through urllib3 retries that resend a request
whose answer did not come (`read=5`); its start-up poll of `/health` uses `requests.get` without one either. A server
that stops answering (hung, SIGSTOPped, its GPU wedged) therefore hung the run instead of failing it.
`bounded_client_class` is the subclass that fixes this, through the hook `VLLMClient.__init__` calls before any other
request (`check_server`): its session sends every request with a deadline (`timeout_s` to wait for the answer, at
most `CONNECT_TIMEOUT_S` to connect), never resends a request the server was given (urllib3 `read=0`; TRL's retries
of refused connections and 5xx answers stay, with their backoff), and turns a timeout or a lost connection into
`ServerUnresponsive` naming the server, the request, the deadline, the config key that sets it and the server's log.

The weight push's NCCL broadcast has no deadline of its own either (a stopped server leaves the trainer's collective
waiting for its peer): `broadcast_deadline` gives it the same `timeout_s`, then aborts the communicator
(`ncclCommAbort`: the blocked collective returns) and raises `ServerUnresponsive`; a broadcast still blocked
`ABORT_GRACE_S` after the abort ends the process (exit code 1, the error on stderr), since a collective whose peer
stopped cannot be recovered in-process.

The trainer's clients (TRL's own, made in `GRPOTrainer.__init__`, and the per-request ones of
`trl_internals.stream_clients`) take `vllm_request_timeout_s`; a teacher server's take `teacher_timeout_s`
(arc_trl/opd/server.py). The log: `arc-trl serve` tells the trainer where each server writes it
(`SERVER_LOGS_ENV`, a JSON object of base URL -> log path); a server started some other way has no known log.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import urlparse

SERVER_LOGS_ENV = "ARC_TRL_SERVER_LOGS"  # {"http://127.0.0.1:8000": "/run/server_logs/student-vllm.log", ...}
CONNECT_TIMEOUT_S = 10.0  # a TCP connection to a live server takes milliseconds; a stopped one still accepts
HEALTH_POLL_S = 1.0  # between two /health polls while waiting for a server to come up
ABORT_GRACE_S = 30.0  # after aborting a weight push's communicator, the wait for its broadcast to return


class ServerUnresponsive(RuntimeError):
    """A vLLM server did not answer a request within its deadline, or the connection to it failed."""


def server_log(base_url: str) -> str | None:
    """The log file of the server at `base_url`, as `arc-trl serve` recorded it in `SERVER_LOGS_ENV` (same port and
    host, `localhost`/`127.0.0.1`/`0.0.0.0` alike); None when unknown."""
    try:
        logs = json.loads(os.environ.get(SERVER_LOGS_ENV) or "{}")
    except json.JSONDecodeError:
        return None
    local = {"localhost", "127.0.0.1", "0.0.0.0", "::1", None}

    def where(url: str) -> tuple[Any, Any]:
        parsed = urlparse(url)
        return ("local" if parsed.hostname in local else parsed.hostname), parsed.port

    target = where(base_url)
    return next((str(path) for url, path in logs.items() if where(url) == target), None)


def describe_log(base_url: str) -> str:
    """`its log: PATH`, or where to look when the trainer does not know it."""
    path = server_log(base_url)
    if path is not None:
        return f"its log: {path}"
    return ("its log: not known to the trainer (arc-trl serve writes <output_dir>/server_logs/<role>.log; a server "
            "started by hand logs where its output went)")


def _root_cause(exc: BaseException) -> str:
    """The useful part of a requests/urllib3 error: "[Errno 111] Connection refused", "Read timed out", ..."""
    text = str(exc)
    for pattern in (r"\[Errno -?\d+\] [^'\")]+", r"Read timed out", r"timed out", r"Connection aborted[^'\")]*",
                    r"Remote end closed connection without response"):
        found = re.search(pattern, text)
        if found:
            return found.group(0)
    return type(exc).__name__


def abort_communicator(communicator) -> bool:
    """`ncclCommAbort` on a vLLM `PyNcclCommunicator` (TRL's weight-update group), on the communicator's device: its
    pending collectives return. False when `communicator` has no NCCL communicator to abort, or the abort failed."""
    nccl, comm = getattr(communicator, "nccl", None), getattr(communicator, "comm", None)
    if nccl is None or comm is None or not hasattr(nccl, "ncclCommAbort"):
        return False
    try:
        with _on_device(getattr(communicator, "device", None)):
            nccl.ncclCommAbort(comm)
    except Exception:  # noqa: BLE001  an abort that fails leaves the grace period's exit
        return False
    return True


def _on_device(device):
    """`torch.cuda.device(device)` for a CUDA device (NCCL calls run on their communicator's device), else nothing."""
    if getattr(device, "type", None) != "cuda":
        return nullcontext()
    import torch

    return torch.cuda.device(device)


@contextmanager
def broadcast_deadline(client, deadline_s: float, timeout_key: str = "vllm_request_timeout_s",
                       grace_s: float | None = None, exit_process: Callable[[int], None] = os._exit) -> Iterator[None]:
    """The weight push inside the block (TRL's `update_named_params`: HTTP announce + NCCL broadcast) within
    `deadline_s`. Past it, the push has failed whatever happens next: `client.communicator` is disabled (vLLM's
    broadcasts return at once: the packed send loop stops using it), dropped from the client and aborted in a thread
    of its own, and `ServerUnresponsive` is raised when the block returns, naming the server, the deadline, its key and
    the server's log. A push still blocked `grace_s` (`ABORT_GRACE_S`) after the deadline (the abort did not free it,
    or hung) calls `exit_process(1)` with the error on stderr."""
    grace_s = ABORT_GRACE_S if grace_s is None else grace_s
    lock = threading.Lock()
    state = ["running"]  # -> "finished" (the push returned in time) or "fired" (the deadline passed first)
    finished, abort_done = threading.Event(), threading.Event()
    abort_result: list[bool] = []

    def message() -> str:
        outcome = ("was aborted" if abort_result[0] else "could not be aborted") if abort_result else \
            "did not return from its abort"
        return (f"vLLM server {client.base_url} did not take the weight push within {deadline_s:g} s "
                f"({timeout_key}); the NCCL broadcast {outcome}; {describe_log(client.base_url)}")

    def abort(communicator) -> None:
        abort_result.append(abort_communicator(communicator))
        abort_done.set()

    def watchdog() -> None:
        if finished.wait(deadline_s):
            return
        with lock:
            if state[0] == "finished":
                return
            state[0] = "fired"
        communicator = getattr(client, "communicator", None)
        if communicator is not None:
            try:
                communicator.disabled = True
                client.communicator = None  # never used again by this client
            except AttributeError:
                pass
        threading.Thread(target=abort, args=(communicator,), name="weight-push-abort", daemon=True).start()
        if finished.wait(grace_s):
            return
        print(f"error: {message()}; the broadcast was still blocked {grace_s:g} s later: the trainer exits",
              file=sys.stderr, flush=True)
        exit_process(1)

    threading.Thread(target=watchdog, name="weight-push-deadline", daemon=True).start()
    try:
        yield
    except Exception as error:
        if _end(lock, state, finished) == "fired":
            abort_done.wait(grace_s)
            raise ServerUnresponsive(message()) from error
        raise
    finally:
        _end(lock, state, finished)  # (again: idempotent) whatever ended the block, the watchdog stands down
    if state[0] == "fired":  # the push returned, but after the deadline: the server may not have the new weights,
        abort_done.wait(grace_s)  # and the communicator is aborted
        raise ServerUnresponsive(message())


def _end(lock: threading.Lock, state: list[str], finished: threading.Event) -> str:
    """The push's block has returned: "finished" unless the deadline fired first."""
    with lock:
        if state[0] == "running":
            state[0] = "finished"
        finished.set()
        return state[0]


def bounded_client_class(timeout_s: float, timeout_key: str = "vllm_request_timeout_s", retries: bool = True,
                         pool_maxsize: int = 64) -> type:
    """A subclass of TRL's `VLLMClient` whose every request waits at most `timeout_s` for its answer (named
    `timeout_key` in errors). `retries`: keep TRL's urllib3 retries of refused connections and 5xx answers (never of a
    request the server was given); False: none (a caller with its own bounded retries). `pool_maxsize`: pooled
    connections (one per concurrent request)."""
    import requests
    from requests.adapters import HTTPAdapter
    from trl.generation.vllm_client import VLLMClient

    if not timeout_s > 0:
        raise ValueError(f"{timeout_key} must be > 0, got {timeout_s}")

    class BoundedVLLMClient(VLLMClient):
        request_timeout_s = float(timeout_s)

        def check_server(self, total_timeout: float = 0.0, retry_interval: float = HEALTH_POLL_S) -> None:
            # VLLMClient.__init__ calls this before any other request: the session is set up here first
            self._bound_session()
            url = f"{self.base_url}/health"
            deadline = time.monotonic() + total_timeout
            while True:
                wait = max(min(self.request_timeout_s, deadline - time.monotonic()), 0.1)
                try:  # outside the session: one attempt per poll (its urllib3 retries back off for a minute)
                    response = requests.get(url, timeout=(min(CONNECT_TIMEOUT_S, wait), wait))
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}"
                except requests.RequestException as exc:
                    last = _root_cause(exc)
                if time.monotonic() + retry_interval > deadline:
                    raise ServerUnresponsive(
                        f"vLLM server {self.base_url} not healthy within {total_timeout:g} s ({url}: {last}); "
                        f"{describe_log(self.base_url)}")
                time.sleep(retry_interval)

        def _bound_session(self) -> None:
            adapter = self.session.adapters.get("http://")
            retry = getattr(adapter, "max_retries", None)
            max_retries = retry.new(read=0) if retries and retry is not None else 0
            for prefix in ("http://", "https://"):
                self.session.mount(prefix, HTTPAdapter(max_retries=max_retries, pool_maxsize=pool_maxsize))
            send = self.session.request
            client = self

            def request(method, url, **kwargs):
                kwargs.setdefault("timeout", (CONNECT_TIMEOUT_S, client.request_timeout_s))
                try:
                    return send(method, url, **kwargs)
                except (requests.Timeout, requests.ConnectionError) as exc:
                    path = urlparse(url).path or url
                    timeout = kwargs["timeout"]
                    wait = timeout[1] if isinstance(timeout, tuple) else timeout
                    raise ServerUnresponsive(
                        f"vLLM server {client.base_url} did not answer {method} {path} within {wait:g} s "
                        f"({timeout_key}): {_root_cause(exc)}; {describe_log(client.base_url)}") from exc

            self.session.request = request

        def update_named_params(self, metadata, named_params) -> None:
            with broadcast_deadline(self, self.request_timeout_s, timeout_key):
                super().update_named_params(metadata, named_params)

        def _get(self, url: str, **kwargs) -> dict:
            return self._answer("GET", url, self.session.get(url, **kwargs))

        def _post(self, url: str, **kwargs) -> dict:
            return self._answer("POST", url, self.session.post(url, **kwargs))

        def _answer(self, method: str, url: str, response) -> dict:
            if response.status_code != 200:
                body = " ".join(response.text.split())[:500]  # one line
                raise RuntimeError(f"vLLM server {self.base_url} answered {method} {urlparse(url).path} with HTTP "
                                   f"{response.status_code}: {body}; {describe_log(self.base_url)}")
            return response.json()

    return BoundedVLLMClient


def bounded_client(base_url: str, timeout_s: float, connection_timeout_s: float | None = None,
                   timeout_key: str = "vllm_request_timeout_s", retries: bool = True, pool_maxsize: int = 64):
    """A `bounded_client_class` client of the server at `base_url`, which must answer `/health` within
    `connection_timeout_s` (default `timeout_s`)."""
    cls = bounded_client_class(timeout_s, timeout_key, retries, pool_maxsize)
    return cls(base_url=base_url, connection_timeout=timeout_s if connection_timeout_s is None else
               connection_timeout_s)
