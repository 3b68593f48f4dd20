"""The step-time budget: where each optimizer step's wall time goes, tokens per second and MFU.

A step runs from the Trainer's `on_step_begin` to its `on_step_end` (data loading before it, and logging, checkpoint
saving and evaluation after it, fall outside). `StepClock` charges every moment of that interval to exactly one
bucket, the innermost phase open on the thread that began the step, or `other` when none is open:

- `generate`: the rollout (`rollout_func`) minus the phases nested in it: the sampler's calls and the rollout's own
  token bookkeeping;
- `weight_sync`: pushing the trainer's weights into vLLM (`VLLMGeneration.sync_weights`);
- `sandbox`: calls into the sandbox pool (sessions created, code turns and programs run);
- `teacher`: teacher scoring on the critical path (in-process forwards, or the wait for a teacher server's results);
- `train`: `training_step` outside the phases above (scoring: rewards and the no-grad log-prob forwards; the
  forward + backward of each micro-batch) and the optimizer step;
- `other`: the rest (gradient clipping, the Trainer loop's bookkeeping between micro-batches).

So `time/step` equals the sum of the six buckets (up to float rounding) and each is >= 0. Phases opened on another
thread are not charged (that time overlaps the step's own thread, which is what sits on the critical path). On CUDA
the clock synchronises the device at every phase boundary, since kernels run asynchronously.

`StepBudget` is a run's budget: the clock, the step's token counts (`batch_metrics.StepTokens`) and GPU memory peak,
and the logged metrics; `StepBudgetCallback` opens and closes it around each optimizer step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import TrainerCallback

from arc_trl.trainer.batch_metrics import StepTokens
from arc_trl.trainer.gpu_memory import memory_metrics, memory_readings, memory_sampler

BUCKETS = ("generate", "sandbox", "teacher", "weight_sync", "train", "other")

# Dense bf16 tensor-core peak per device, TFLOP/s (NVIDIA data sheets). Matched against torch.cuda.get_device_name.
PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100", 989.0),  # SXM
    ("H200", 989.0),
    ("A100", 312.0),
)


def _cuda_sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class StepClock:
    """Exclusive wall-time accounting of one step: `begin()`, nested `with clock.phase(name):`, `end()`."""

    def __init__(self, sync: Callable[[], None] = _cuda_sync, now: Callable[[], float] = time.perf_counter) -> None:
        self._sync = sync
        self._now = now
        self._open = False
        self._thread: int | None = None
        self._stack: list[str] = []
        self._totals: dict[str, float] = {}
        self._started = self._last = 0.0

    @property
    def is_open(self) -> bool:
        return self._open

    def begin(self) -> None:
        self._sync()
        self._open, self._thread, self._stack = True, threading.get_ident(), []
        self._totals = dict.fromkeys(BUCKETS, 0.0)
        self._started = self._last = self._now()

    def _charge(self) -> None:
        now = self._now()
        self._totals[self._stack[-1] if self._stack else "other"] += now - self._last
        self._last = now

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if not self._open or threading.get_ident() != self._thread:
            yield
            return
        if name not in self._totals:
            raise ValueError(f"unknown step-time bucket {name!r} (known: {', '.join(BUCKETS)})")
        self._sync()
        self._charge()
        self._stack.append(name)
        try:
            yield
        finally:
            if self._open:
                self._sync()
                self._charge()
                self._stack.pop()

    def end(self) -> dict[str, float]:
        """Close the step: `{bucket: seconds}` plus `step` (the step's wall time, the sum of the buckets)."""
        if not self._open:
            return {}
        self._sync()
        self._charge()
        self._open = False
        return {**self._totals, "step": self._last - self._started}


class TimedPool:
    """A sandbox pool whose method calls are charged to the `sandbox` bucket; everything else is the pool's."""

    def __init__(self, pool: Any, clock: StepClock) -> None:
        self._pool = pool
        self._clock = clock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._pool, name)
        if name.startswith("_") or not callable(value):
            return value

        def timed(*args, **kwargs):
            with self._clock.phase("sandbox"):
                return value(*args, **kwargs)

        return timed


def timed_method(obj: Any, name: str, clock: StepClock, bucket: str) -> None:
    """Replace `obj.name` by a wrapper charging its calls to `bucket` (on the instance: the class is untouched)."""
    method = getattr(obj, name)

    def timed(*args, **kwargs):
        with clock.phase(bucket):
            return method(*args, **kwargs)

    setattr(obj, name, timed)


def peak_flops_per_device(override_tflops: float | None, device: torch.device) -> float | None:
    """Peak FLOP/s of one device: the `peak_tflops` override, else the table for known GPUs, else None (CPU)."""
    if override_tflops is not None:
        if not override_tflops > 0:
            raise ValueError(f"peak_tflops must be > 0 (TFLOP/s of one device), got {override_tflops}")
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in PEAK_BF16_TFLOPS:
        if key in name:
            return tflops * 1e12
    return None


def count_model_params(model: torch.nn.Module) -> int:
    """Parameters that do matmul work per token: all of them but an input embedding not tied to the output layer.
    (ZeRO-3 shards report their full size through `ds_numel`.)"""

    def numel(p: torch.nn.Parameter) -> int:
        return int(getattr(p, "ds_numel", 0) or p.numel())

    total = sum(numel(p) for p in model.parameters())
    get_in, get_out = getattr(model, "get_input_embeddings", None), getattr(model, "get_output_embeddings", None)
    emb = get_in() if callable(get_in) else None
    out = get_out() if callable(get_out) else None
    if emb is not None and getattr(emb, "weight", None) is not None:
        if out is None or getattr(out, "weight", None) is not emb.weight:
            total -= numel(emb.weight)
    return total


def step_metrics(
    times: dict[str, float],
    generated_tokens: float,
    trained_tokens: float,
    no_grad_tokens: float,
    num_params: int,
    peak_flops_total: float | None,
) -> dict[str, float]:
    """The logged step budget. Token counts are summed over processes; `peak_flops_total` is per device x devices.

    MFU = (6 N x trained tokens + 2 N x tokens of the extra no-grad forwards) / (time/step x peak FLOP/s)."""
    out = {f"time/{bucket}": times[bucket] for bucket in (*BUCKETS, "step")}
    out["tokens/generated"] = generated_tokens
    out["tokens/trained"] = trained_tokens
    out["throughput/generated_tokens_per_s"] = generated_tokens / times["generate"] if times["generate"] > 0 else 0.0
    out["throughput/trained_tokens_per_s"] = trained_tokens / times["train"] if times["train"] > 0 else 0.0
    if peak_flops_total and times["step"] > 0:
        flops = 6.0 * num_params * trained_tokens + 2.0 * num_params * no_grad_tokens
        out["mfu"] = flops / (times["step"] * peak_flops_total)
    return out


class StepBudget:
    """One run's step-time budget: `begin()` and `end() -> metrics` around each optimizer step (`StepBudgetCallback`),
    the tokens of the step counted in between (`tokens`, only while the step is open)."""

    def __init__(self, clock: StepClock, model: torch.nn.Module, accelerator, peak_tflops: float | None) -> None:
        self.clock = clock
        self.accelerator = accelerator
        self.tokens = StepTokens()
        self.num_params = count_model_params(model)
        peak = peak_flops_per_device(peak_tflops, accelerator.device)
        self.peak_flops_total = None if peak is None else peak * accelerator.num_processes
        self.memory_peak = memory_sampler(accelerator.device)  # None on CPU
        self.step_ends: list[float] = []  # wall-clock (Unix) time at the end of each step: GPU traces line up on it

    def begin(self) -> None:
        self.tokens = StepTokens()
        if self.memory_peak is not None:
            self.memory_peak.reset()
        self.clock.begin()

    def end(self) -> dict[str, float]:
        """The step's `time/*`, `tokens/*`, `throughput/*`, `mfu` and `memory/*` (all processes; empty if not begun)."""
        times = self.clock.end()
        if not times:
            return {}
        self.step_ends.append(time.time())
        tokens = self.tokens.summed(self.accelerator)
        metrics = step_metrics(times, tokens["generated"], tokens["trained"], tokens["no_grad"], self.num_params,
                               self.peak_flops_total)
        readings = memory_readings(self.accelerator.device, self.memory_peak)
        if readings:  # the largest process's figures
            local = torch.tensor([readings], dtype=torch.float64, device=self.accelerator.device)
            peaks = self.accelerator.gather(local)
            metrics.update(memory_metrics(peaks.max(dim=0).values.tolist()))
        return metrics

    def close(self) -> None:
        if self.memory_peak is not None:
            self.memory_peak.stop()


class StepBudgetCallback(TrainerCallback):
    """Opens and closes the `StepBudget` around each optimizer step, hands its metrics to `log`, and charges the
    optimizer step itself (Trainer's `on_pre_optimizer_step` .. `on_optimizer_step`) to `train`."""

    def __init__(self, budget: StepBudget, log: Callable[[dict[str, float]], None]) -> None:
        self.budget = budget
        self.log = log
        self._optimizer_phase = None

    def on_step_begin(self, args, state, control, **kwargs):
        self.budget.begin()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._optimizer_phase = self.budget.clock.phase("train")
        self._optimizer_phase.__enter__()

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self._optimizer_phase is not None:
            self._optimizer_phase.__exit__(None, None, None)
            self._optimizer_phase = None

    def on_step_end(self, args, state, control, **kwargs):
        metrics = self.budget.end()
        if metrics:
            self.log(metrics)
