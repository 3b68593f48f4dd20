"""A vLLM server that stops answering mid-step ends the run, in bounded time, with its cause named.

`arc-trl train` (`train_entry.main`, tests/hung_server_worker.py) runs as a process of its own, in server mode with
`async_rollouts: 1`, against the stand-in server (tests/fake_vllm_server.py), which stops answering anything after a
given request (a hung or SIGSTOPped server: connections are still accepted, nothing comes back). Before the
deadlines (arc_trl/integrations/vllm_server_client.py) such a run never exited: TRL's client waits forever, and the trainer's
`close()` joined the background rollout's thread blocked in it. The benchmark of the same: benchmarks/
hung_server_drill.py.
"""

from __future__ import annotations

import pytest
from hung_server_worker import run_drill

pytest.importorskip("vllm")  # TRL's VLLMClient needs vLLM installed

TIMEOUT_S = 2.0  # vllm_request_timeout_s of the run
# From the hang to the exit: the held request's deadline (TIMEOUT_S; a request the server was given is not resent),
# then what the run still does before the error reaches the training thread (at most the rest of one training step
# of this tiny run, ~5 s on 2 shared cores) and its teardown (the sandbox's and the interpreter's, ~2 s): 3x that.
BOUND_S = TIMEOUT_S + 20.0


@pytest.mark.slow
@pytest.mark.parametrize("hang_on, hang_after, unanswered", [
    # step 1's background rollout: its 2nd request (the 4th completion) is never answered, while step 0 trains
    ("/v1/completions", 3, "POST /v1/completions"),
    # step 1's weight push, on the training thread (step 0's was answered)
    ("/start_weight_update", 1, "POST /start_weight_update"),
])
def test_a_run_whose_server_stops_answering_exits_with_the_error(tiny_model_dir, tiny_tokenizer, tmp_path, hang_on,
                                                                 hang_after, unanswered):
    result = run_drill(tiny_model_dir, tmp_path, tiny_tokenizer, hang_after, TIMEOUT_S, hang_on=hang_on,
                       limit_s=300)
    assert result["hung"], result["stderr"][-3000:]  # the server did stop answering mid-run
    assert result["exit_code"] == 1, result["stderr"][-3000:]
    assert result["stopped_s"] < BOUND_S
    last = result["stderr"].strip().splitlines()
    error = next(line for line in reversed(last) if "ServerUnresponsive" in line)
    log = tmp_path / "student-vllm.log"  # where ARC_TRL_SERVER_LOGS (set by arc-trl serve) says the server logs
    assert error.endswith(f"did not answer {unanswered} within 2 s (vllm_request_timeout_s): Read timed out; its log: "
                          f"{log}")
    assert result["held_requests"] == 1  # the request was not resent (TRL's urllib3 retries would resend it 5x)
    assert result["leftover"] == []  # nothing the run started is left running: its sandbox processes are gone
