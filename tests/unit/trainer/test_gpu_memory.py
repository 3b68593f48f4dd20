"""Peak GPU memory metrics (arc_trl/trainer/gpu_memory.py), with a fake device reading; GPU-free."""

import threading
import time

import torch

from arc_trl.train_entry import format_step_budget
from arc_trl.trainer.gpu_memory import GIB, DeviceMemoryPeak, memory_metrics, memory_readings, memory_sampler


class Readings:
    def __init__(self, values):
        self.values, self.lock = list(values), threading.Lock()

    def __call__(self):
        with self.lock:
            return self.values.pop(0) if len(self.values) > 1 else self.values[0]


def test_peak_keeps_the_largest_sample_and_reset_starts_over():
    sampler = DeviceMemoryPeak(Readings([5, 9, 3, 2, 4]), interval_s=3600)  # no thread: explicit samples only
    sampler.reset()  # reads 5
    sampler._sample()  # 9
    sampler._sample()  # 3
    assert sampler.peak() == 9  # peak() reads once more (2)
    sampler.reset()  # reads 4
    assert sampler.peak() == 4


def test_background_thread_catches_a_spike_between_step_boundaries():
    values = [1 * GIB] * 3 + [7 * GIB] + [1 * GIB] * 10_000
    sampler = DeviceMemoryPeak(Readings(values), interval_s=0.001).start()
    try:
        deadline = time.time() + 5
        while sampler.peak() < 7 * GIB and time.time() < deadline:
            time.sleep(0.01)
        assert sampler.peak() == 7 * GIB
    finally:
        sampler.stop()
    assert sampler._thread is None


def test_cpu_logs_no_memory_metrics():
    device = torch.device("cpu")
    assert memory_sampler(device) is None
    assert memory_readings(device, None) == []
    assert memory_metrics([]) == {}


def test_metrics_are_gib():
    m = memory_metrics([3 * GIB, 4 * GIB, 50.5 * GIB])
    assert m == {"memory/peak_allocated_gib": 3.0, "memory/peak_reserved_gib": 4.0, "memory/device_peak_gib": 50.5}


def test_run_summary_line_names_the_peaks():
    summary = {"step_time_s": {"step": 2.0, "generate": 1.0, "train": 1.0}, "generated_tokens_per_s": 10.0,
               "trained_tokens_per_s": 20.0, "mfu": 0.03,
               "peak_memory_gib": {"peak_allocated": 12.25, "peak_reserved": 14.0, "device_peak": 40.0}}
    line = format_step_budget(summary)
    assert "peak GPU memory 40.0 GiB on the device, torch 12.2 GiB allocated / 14.0 GiB reserved" in line
    summary["peak_memory_gib"] = {"peak_allocated": None, "peak_reserved": None, "device_peak": None}
    assert "peak GPU memory" not in format_step_budget(summary)
