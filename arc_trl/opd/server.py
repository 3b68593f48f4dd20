"""A teacher on its own vLLM server, scored through the OpenAI completions endpoint with `prompt_logprobs`.

Scoring reuses TRL's `VLLMClient.get_sequence_logprobs`. Requests carry a timeout (`teacher_timeout_s`, also the wait
for the server at start: arc_trl/integrations/vllm_server_client.py) and are retried a bounded number of times; then
`TeacherUnavailableError` stops the run with a message saying how to resume (the last checkpoint holds the state).
`submit` runs requests on a background thread so they overlap with generation.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future, ThreadPoolExecutor

from arc_trl.opd.teacher import TeacherUnavailableError
from arc_trl.integrations.vllm_server_client import bounded_client


class ServerTeacher:
    """Scores sequences with a vLLM server's prompt log-probs: the teacher's own distribution (temperature 1).

    vLLM applies no temperature to prompt log-probs (whatever `temperature` or `--logprobs-mode` say), and the
    in-process teachers match that: docs/opd.md ("Temperature") explains the choice.
    """

    overlaps_generation = True  # requests run on a background thread while the rollout goes on

    def __init__(self, base_url: str, timeout_s: float = 300.0, max_retries: int = 3, batch_size: int = 8) -> None:
        """`timeout_s` bounds every request, and also the wait for the server to answer at start."""
        self.base_url = base_url
        self.max_retries = max_retries
        self.batch_size = batch_size
        try:
            # every request bounded by timeout_s, no hidden retries (score's own are bounded), at most 8 connections
            self.client = bounded_client(base_url, timeout_s, timeout_key="teacher_timeout_s", retries=False,
                                         pool_maxsize=8)
        except Exception as exc:  # ConnectionError after the timeout, or a malformed answer
            raise TeacherUnavailableError(
                f"teacher server at {base_url} is not reachable within teacher_timeout_s={timeout_s:g} s ({exc}). "
                "Start it first, e.g. `vllm serve TEACHER --port PORT`, and set teacher_server_url."
            ) from exc
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="teacher")

    def score(self, sequences, prompt_lengths):
        last_error: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                result = self.client.get_sequence_logprobs(
                    sequences,
                    prompt_lengths,
                    top_logprobs=0,
                    chunk_size=self.batch_size,
                )
                return [
                    [lp[0] if lp and math.isfinite(lp[0]) else math.nan for lp in seq]
                    for seq in result["actual_logprobs"]
                ]
            except Exception as exc:
                last_error = exc
                if attempt < self.max_retries:
                    time.sleep(min(2.0**attempt, 10.0))
        raise TeacherUnavailableError(
            f"teacher server at {self.base_url} failed {self.max_retries + 1} times (last error: {last_error}). "
            "Restart it and resume training with --resume_from_checkpoint <output_dir>/checkpoint-N."
        )

    def submit(self, sequences, prompt_lengths) -> Future:
        return self._pool.submit(self.score, sequences, prompt_lengths)
