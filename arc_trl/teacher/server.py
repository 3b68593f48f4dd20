"""A teacher on its own vLLM server, scored through the OpenAI completions endpoint with `prompt_logprobs`.

Scoring reuses TRL's `VLLMClient.get_sequence_logprobs`. Requests carry a timeout and are retried a bounded number
of times; then `TeacherUnavailableError` stops the run with a message saying how to resume (the last checkpoint
holds the state). `submit` runs requests on a background thread so they overlap with generation.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

from arc_trl.teacher.base import TeacherUnavailableError


class ServerTeacher:
    overlaps_generation = True  # requests run on a background thread while the rollout goes on

    def __init__(
        self,
        base_url: str,
        temperature: float = 1.0,
        timeout_s: float = 300.0,
        max_retries: int = 3,
        batch_size: int = 8,
        connect_timeout_s: float = 60.0,
    ) -> None:
        from trl.generation.vllm_client import VLLMClient

        self.base_url = base_url
        self.temperature = temperature
        self.max_retries = max_retries
        self.batch_size = batch_size
        try:
            self.client = VLLMClient(base_url=base_url, connection_timeout=connect_timeout_s)
        except Exception as exc:  # ConnectionError after the timeout, or a malformed answer
            raise TeacherUnavailableError(
                f"teacher server at {base_url} is not reachable ({exc}). Start it first, e.g. "
                f"`vllm serve TEACHER --port PORT`, and set teacher_server_url."
            ) from exc
        # VLLMClient's session has no request timeout (a hung server must not hang training) and its own urllib3
        # retries back off for a minute per call; ours below are the only, bounded, retries.
        from requests.adapters import HTTPAdapter

        for prefix in ("http://", "https://"):
            self.client.session.mount(prefix, HTTPAdapter(max_retries=0, pool_maxsize=8))
        self.client.session.request = partial(self.client.session.request, timeout=timeout_s)
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="teacher")

    def score(self, sequences, prompt_lengths):
        last_error: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                result = self.client.get_sequence_logprobs(
                    sequences,
                    prompt_lengths,
                    top_logprobs=0,
                    temperature=self.temperature,
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
