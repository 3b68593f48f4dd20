"""benchmarks/step_summary.py: the figures of results/gpu_step_summary.json from profile_step.py outputs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("step_summary", ROOT / "benchmarks" / "step_summary.py")
step_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(step_summary)


def _profile(step_s: list[float], train_s: list[float], device="H100", peak=30.0) -> dict:
    steps = [{"step": i + 1, "train_padding_frac": 0.1 * (i + 1),
              "budget": {"time/step": s, "time/train": t, "time/generate": s - t, "mfu": 0.05}}
             for i, (s, t) in enumerate(zip(step_s, train_s))]
    steps[-1]["torch_profile"] = {"wall_s": 99.0}  # the profiled step is left out
    return {"train_args": ["--config", "x.yaml"], "steps": steps, "device": device,
            "run_summary": {"peak_memory_gib": {"device_peak": peak}}}


def test_summary_means_measured_steps_and_pairs_the_baseline(tmp_path):
    baseline = _profile([20.0, 8.0, 8.0, 50.0], [10.0, 4.0, 4.0, 40.0], peak=33.0)
    after = _profile([15.0, 5.0, 4.0, 40.0], [9.0, 2.0, 2.0, 30.0], peak=31.5)
    row = step_summary.summary({"qwen3_0.6b_learning": (baseline, after)}, "2026-11-24")["qwen3_0.6b_learning"]
    assert row["steps_measured"] == [2, 3]  # step 1 is warm-up, step 4 ran under the profiler
    assert row["step_s"] == 4.5 and row["baseline_step_s"] == 8.0 and row["speedup"] == pytest.approx(1.778)
    assert row["time/train"] == 2.0 and row["time/generate"] == 2.5
    assert row["train_mfu"] == pytest.approx(0.05 * 4.5 / 2.0) and row["baseline_train_mfu"] == pytest.approx(0.1)
    assert row["peak_gib"] == 31.5 and row["baseline_peak_gib"] == 33.0
    assert row["train_padding_frac"] == pytest.approx(0.25) and row["device"] == "H100" and row["date"] == "2026-11-24"
    json.dumps(row)


def test_summary_refuses_runs_from_different_devices():
    with pytest.raises(ValueError, match="not comparable"):
        step_summary.summary({"s": (_profile([1, 1, 1], [1, 1, 1], device="H200"), _profile([1, 1, 1], [1, 1, 1]))},
                             "2026-11-24")


def test_a_profile_without_measured_steps_is_an_error_naming_the_run():
    with pytest.raises(ValueError, match="x.yaml"):
        step_summary.shape_figures(_profile([1.0], [1.0]))


def test_targets_are_bounds_on_the_run_after_the_change():
    """step_s and peak_gib are upper bounds, train_mfu a lower bound; target_met needs all of them."""
    after = _profile([15.0, 5.0, 4.0, 40.0], [9.0, 2.0, 2.0, 30.0], peak=31.5)  # step 4.5 s, train MFU 0.1125
    pair = {"s": (_profile([20.0, 8.0, 8.0, 50.0], [10.0, 4.0, 4.0, 40.0]), after)}
    met = step_summary.summary(pair, "d", targets={"s": step_summary.parse_target("step_s=4.5,train_mfu=0.1,peak_gib=32")})
    assert met["s"]["target_step_s"] == 4.5 and met["s"]["target_step_s_met"] and met["s"]["target_met"]
    missed = step_summary.summary(pair, "d", targets={"s": {"step_s": 4.4, "train_mfu": 0.2}})["s"]
    assert not missed["target_step_s_met"] and not missed["target_train_mfu_met"] and not missed["target_met"]
    assert "target_met" not in step_summary.summary(pair, "d")["s"]
    with pytest.raises(ValueError, match="unknown key 'mfu'"):
        step_summary.parse_target("mfu=0.3")
    with pytest.raises(ValueError, match="step_s needs a number, got '45s'"):
        step_summary.parse_target("step_s=45s")
