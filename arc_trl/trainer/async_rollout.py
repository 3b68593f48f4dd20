"""Asynchronous rollouts (`async_rollouts: 1`): the rollout of step t+1 plays in the background while step t trains.

The sequence, at the start of step t (`async_generate`, in `ArcGRPOTrainer._generate`, every process together):

1. take the background rollout of step t's rows, waiting for it if it is still playing (`async/wait_s`); it was
   launched at the start of step t-1, sampled with the weights of optimizer step t-1;
2. TRL's `_generate`: the weight push of step t (`vllm_generation.sync_weights`, once per step, as today), made
   while nothing is in flight, so the server is idle between two batches; then `rollout_func` hands over the taken
   episodes (`ArcRollout.played`), or plays the rows now when there are none (the first step of a `train()` call, or
   after a discard): the synchronous path;
3. launch the rollout of step t+1's rows in the background, with step t's weights (`policy_version` t), unless step t
   is the run's last; then step t scores and trains. TRL's old-log-prob forward and vLLM importance-sampling
   correction (the sampler's log-probs against the trainer's) cover the one-step lag.

Step t+1's rows come from a one-step read-ahead over the trainer's own batches (`StepLookahead`, in
`Trainer.get_batch_samples`, which fetches an optimizer step's batches before it trains): the rows trained at each
step are exactly those the dataloader gave for it, as in a synchronous run; only their sampling is one step older.

Threading: one background daemon thread (`arc-async-rollout`) plays one rollout at a time through a
`DetachedServerGenerator` (arc_trl/rollout/detached.py): per-request generation, no collective call, no weight push,
sampling settings frozen when it is built; the raw sandbox pool (not the step clock's timed one, so `time/*` stays
the training thread's). Every collective stays on the training thread, in the same order on every process: whether
the taken rollout is used is agreed by all processes (`agree`) before anything else, so a process never plays a
synchronous rollout (collective) while another does not.

Teacher: a teacher that overlaps generation (a server, `rollout.on_finished` set) scores the background episodes as
they finish, from the background thread (`TeacherTerm.submit`, no step clock); the step that takes the rollout adopts
those jobs (`TeacherTerm.adopt`), so its teacher time is the wait for what is left. A dropped rollout's jobs are
ignored.

Bookkeeping: a rollout is used only for the rows it was launched for and when `0 <= step - version <= max_lag`;
otherwise it is dropped and counted (`dropped`, the run's total; logged as `async/dropped_rollouts`, the drops since
the last log). A new `train()` call (a resume, the collapse guard's rollback) and its end discard the rollout in
flight (`attempt`), which is dropped and counted too; a drop at the end of a `train()` call, after its last step's
log, is logged at once (`log_drops`: a log entry of its own at that step);
the in-training evaluation waits for it first (`settle`: no push, no temperature change under a rollout in flight).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from arc_trl.rollout.episode import Episode

Rows = list[dict[str, Any]]
logger = logging.getLogger(__name__)


@dataclass
class Launched:
    """A rollout launched in the background."""

    rows: Rows
    version: int  # the optimizer step whose weights sample it
    future: Future
    cancel: threading.Event
    teacher_jobs: list = field(default_factory=list)  # (episode indices, future of their teacher scores), if any


class StepLookahead:
    """`Trainer.get_batch_samples` one optimizer step ahead: returns this step's batches, keeps the next step's."""

    def __init__(self) -> None:
        self.iterator: Any = None
        self.ahead: tuple[list, Any] | None = None

    def batches(self, iterator, fetch: Callable[[], tuple[list, Any]]) -> tuple[list, Any]:
        """This step's `(batch_samples, num_items_in_batch)`; `fetch()` reads one step's from `iterator`."""
        current = self.ahead if iterator is self.iterator and self.ahead is not None else fetch()
        self.iterator, self.ahead = iterator, fetch()  # at the end of an epoch: no batch (the next one starts anew)
        return current

    def next_rows(self) -> Rows | None:
        """The next step's generation batch (the dataset rows of its first micro-step), None when there is none."""
        samples = self.ahead[0] if self.ahead is not None else None
        return samples[0] if samples else None

    def reset(self) -> None:
        self.iterator = self.ahead = None


class AsyncRollouts:
    """At most one rollout in flight, and what happened to each (`history`)."""

    def __init__(self, max_lag: int = 1, agree: Callable[[bool, bool], tuple[bool, bool]] | None = None,
                 log_drops: Callable[[dict[str, float]], None] | None = None) -> None:
        self.max_lag = max_lag
        self.log_drops = log_drops  # logs the drops of a train() call's end (Trainer.log), None: they wait
        self.failure_timeout_s = 60.0  # how long a failed train(), or close(), waits for the rollout in flight to stop
        self.agree = agree or (lambda usable, failed: (usable, failed))  # -> (all usable, any failed)
        self.thread: threading.Thread | None = None  # the rollout's thread (a daemon: never holds up the exit)
        self.lookahead = StepLookahead()
        self.pending: Launched | None = None
        self.taken: Launched | None = None  # the rollout the last `take` used (None: it played the rows itself)
        self.dropped = 0  # in this run, cumulative
        self.dropped_logged = 0  # of them, those logged already (each step logs the ones since the last)
        self.history: list[dict[str, Any]] = []  # {"version", "step", "used", "reason"} per launched rollout

    def launch(self, rows: Rows, version: int, play: Callable[[], list[Episode]], cancel: threading.Event,
               teacher_jobs: list | None = None) -> None:
        """Start `play()` (the episodes of `rows`) on the background thread; `cancel` discards it; `teacher_jobs`: the
        list `play` adds its teacher scoring jobs to, handed to the step that takes it."""
        if self.pending is not None:
            raise RuntimeError("a background rollout is in flight already")

        future: Future = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                episodes = play()
                for ep in episodes:
                    ep.policy_version = version
            except BaseException as exc:  # noqa: BLE001  raised by take(), on the training thread
                future.set_exception(exc)
            else:
                future.set_result(episodes)

        # a daemon thread, not a ThreadPoolExecutor's (which the interpreter joins at exit): a rollout blocked on a
        # server must not keep a failed run from exiting; the requests' deadlines end it (vllm_request_timeout_s)
        self.thread = threading.Thread(target=run, name="arc-async-rollout", daemon=True)
        self.pending = Launched(rows, version, future, cancel, teacher_jobs if teacher_jobs is not None else [])
        self.thread.start()

    def take(self, rows: Rows, step: int) -> tuple[list[Episode] | None, dict[str, float]]:
        """The background episodes of `rows` for training step `step` (None: play them now) and the metrics.

        Waits for the rollout in flight. Collective through `agree`: every process calls it at the same point."""
        launched, self.pending, self.taken = self.pending, None, None
        episodes, error, reason, waited = None, None, None, 0.0
        if launched is not None:
            start = time.perf_counter()
            try:
                episodes = launched.future.result()
            except BaseException as exc:  # noqa: BLE001  raised below, once every process knows
                error = exc
            waited = time.perf_counter() - start
            lag = step - launched.version
            if launched.rows is not rows:
                reason = "rows"  # launched for other rows than this step's
            elif not 0 <= lag <= self.max_lag:
                reason = "stale"
        usable, failed = self.agree(launched is not None and error is None and reason is None, error is not None)
        if failed:
            if launched is not None:
                self._drop(launched, step, "failed")
            raise error or RuntimeError("the background rollout failed on another process")
        if launched is not None and not usable:
            self._drop(launched, step, reason or "another process")
            episodes = None
        if episodes is not None:
            self.taken = launched
            self.history.append({"version": launched.version, "step": step, "used": True, "reason": None})
        lags = [step - ep.policy_version for ep in episodes] if episodes else [0]
        dropped, self.dropped_logged = self.dropped - self.dropped_logged, self.dropped
        return episodes, {"async/policy_lag": float(sum(lags) / len(lags)), "async/policy_lag_max": float(max(lags)),
                          "async/dropped_rollouts": float(dropped), "async/wait_s": waited}

    def settle(self) -> None:
        """Wait until the rollout in flight has finished (it stays pending, to be taken)."""
        if self.pending is not None:
            wait_for([self.pending.future])

    def discard(self, step: int | None, reason: str, timeout_s: float | None = None) -> None:
        """Cancel the rollout in flight, wait for it to end (at most `timeout_s`: a hung server must not hide the
        error that ended training), and drop it (counted)."""
        launched, self.pending = self.pending, None
        self.lookahead.reset()
        if launched is None:
            return
        launched.cancel.set()
        done, _ = wait_for([launched.future], timeout=timeout_s)
        if not done:
            logger.warning("the discarded background rollout did not end within %s s (%s); going on without it",
                           timeout_s, reason)
        self._drop(launched, step, reason)

    def _drop(self, launched: Launched, step: int | None, reason: str) -> None:
        self.dropped += 1
        self.history.append({"version": launched.version, "step": step, "used": False, "reason": reason})

    @contextmanager
    def attempt(self, trainer) -> Iterator[None]:
        """One `Trainer.train` call: nothing in flight before it (a resume or a rollback loads other weights) or after
        it (the rollout of a step that is not trained)."""
        self.discard(trainer.state.global_step, "train() starts")
        try:
            yield
        except BaseException:  # training failed: the rollout must not hang the way out (a server that stopped)
            self.discard(trainer.state.global_step, "train() failed", timeout_s=self.failure_timeout_s)
            raise
        self.discard(trainer.state.global_step, "train() ends")
        if self.log_drops is not None and self.dropped > self.dropped_logged:  # after the last step's log
            dropped, self.dropped_logged = self.dropped - self.dropped_logged, self.dropped
            self.log_drops({"async/dropped_rollouts": float(dropped)})

    def close(self) -> None:
        """Discard the rollout in flight, waiting at most `failure_timeout_s` for it to stop (a close after a failure
        must not hang behind a rollout blocked on a server: its thread is a daemon)."""
        self.discard(None, "closed", timeout_s=self.failure_timeout_s)


def process_agreement(accelerator) -> Callable[[bool, bool], tuple[bool, bool]]:
    """`AsyncRollouts.agree` over the processes: (usable on every process, failed on any)."""
    if accelerator.num_processes == 1:
        return lambda usable, failed: (usable, failed)
    import torch

    def agree(usable: bool, failed: bool) -> tuple[bool, bool]:
        flags = torch.tensor([[float(not usable), float(failed)]], device=accelerator.device)
        worst = accelerator.gather(flags).max(dim=0).values
        return not bool(worst[0].item()), bool(worst[1].item())

    return agree


def async_generate(trainer, prompts: list, generate: Callable[[list], Any]) -> Any:
    """`GRPOTrainer._generate` (`generate`) of a training batch with `async_rollouts: 1`: take, push, launch."""
    from arc_trl.rollout.detached import DetachedServerGenerator
    from arc_trl.integrations.trl_internals import log_metrics

    manager: AsyncRollouts = trainer.async_rollouts
    rollout, step = trainer.rollout, trainer.state.global_step
    episodes, metrics = manager.take(rollout.rows, step)
    if episodes is not None and manager.taken.teacher_jobs:  # scored as they finished, in the background
        trainer.teacher_term.adopt(manager.taken.teacher_jobs)
    with rollout.played(episodes):
        output = generate(prompts)  # the weight push of this step (TRL's), then rollout_func
    log_metrics(trainer, "train", metrics)
    rows = manager.lookahead.next_rows()
    if rows is not None and step + 1 < trainer.state.max_steps:
        cancel = threading.Event()
        generator = DetachedServerGenerator(trainer, cancel)  # built here, on the training thread
        next_prompts = copy.deepcopy([row["prompt"] for row in rows])  # as GRPOTrainer._generate_and_score_completions
        jobs: list = []

        def score_finished(finished: list[Episode]) -> None:  # a teacher that overlaps generation: as episodes end
            jobs.append(trainer.teacher_term.submit(rows, finished))

        on_finished = score_finished if rollout.on_finished is not None else None
        manager.launch(rows, step, lambda: rollout.play(rows, next_prompts, trainer, generator, trainer.sandbox_pool,
                                                        on_finished), cancel, jobs)
    return output
