"""run_summary.json's per-step figures: what the layout and FP8 figures read back from each step."""

from types import SimpleNamespace

from arc_trl.train_entry import summarise


def test_each_step_keeps_its_time_memory_sampling_and_async_figures_only(tmp_path):
    step = {"step": 2, "reward": 1.0, "time/step": 30.0, "time/generate": 12.0, "memory/device_peak_gib": 60.0,
            "sampling/sampling_logp_difference/mean": 0.06, "sampling/masked_frac": 0.01,
            "sampling/clipped_frac": 0.002, "sampling/importance_sampling_ratio/min": 0.7, "async/policy_lag": 1.0,
            "episode/turns": 6.0, "loss": 0.1}
    trainer = SimpleNamespace(state=SimpleNamespace(log_history=[step, {"train_runtime": 90.0}], global_step=2),
                              args=SimpleNamespace(output_dir=str(tmp_path / "run")))

    [kept] = summarise(trainer, started=0.0)["per_step"]

    assert kept == {key: value for key, value in step.items() if key not in ("reward", "episode/turns", "loss")}
