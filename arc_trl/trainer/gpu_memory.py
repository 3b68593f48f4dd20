"""Peak GPU memory per optimizer step: what torch's allocator holds, and what the whole device holds.

torch's counters (`max_memory_allocated` / `max_memory_reserved`) see the trainer's tensors and a colocated vLLM's
KV cache when vLLM allocates through torch, but not memory vLLM takes with its own allocator (sleep mode's CuMem
pool) nor other processes on the GPU. So `DeviceMemoryPeak` also samples the device's used memory (total - free,
all processes) on a background thread and keeps the step's maximum. Logged per step:

- `memory/peak_allocated_gib`, `memory/peak_reserved_gib`: torch's peaks since the run began (max over processes);
- `memory/device_peak_gib`: the largest device-wide use seen during the step (sampled every `interval_s`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch

GIB = 2**30


def _device_used_bytes(device: torch.device) -> int:
    free, total = torch.cuda.mem_get_info(device)
    return total - free


class DeviceMemoryPeak:
    """Largest device-wide memory use between `reset()` and `peak()`, sampled on a daemon thread."""

    def __init__(self, read: Callable[[], int], interval_s: float = 0.05) -> None:
        self._read = read
        self._interval_s = interval_s
        self._peak = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        value = self._read()
        with self._lock:
            self._peak = max(self._peak, value)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def start(self) -> DeviceMemoryPeak:
        if self._thread is None:
            self._sample()
            self._thread = threading.Thread(target=self._loop, name="device-memory-peak", daemon=True)
            self._thread.start()
        return self

    def reset(self) -> None:
        with self._lock:
            self._peak = 0
        self._sample()

    def peak(self) -> int:
        self._sample()
        with self._lock:
            return self._peak

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None


def memory_sampler(device: torch.device) -> DeviceMemoryPeak | None:
    """A started sampler for a CUDA device, None elsewhere (CPU runs log no memory metrics)."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    return DeviceMemoryPeak(lambda: _device_used_bytes(device)).start()


def memory_readings(device: torch.device, sampler: DeviceMemoryPeak | None) -> list[float]:
    """[torch peak allocated, torch peak reserved, device peak] in bytes for this process; [] on CPU."""
    if sampler is None:
        return []
    return [float(torch.cuda.max_memory_allocated(device)), float(torch.cuda.max_memory_reserved(device)),
            float(sampler.peak())]


def memory_metrics(readings: list[float]) -> dict[str, float]:
    """The logged keys from per-process readings already reduced by max over processes (bytes -> GiB)."""
    if not readings:
        return {}
    allocated, reserved, device = readings
    return {"memory/peak_allocated_gib": allocated / GIB, "memory/peak_reserved_gib": reserved / GIB,
            "memory/device_peak_gib": device / GIB}
