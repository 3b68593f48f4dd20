"""A real two-run sweep of the tiny CPU config with the local launcher; a re-run skips both finished runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from arc_trl.launch.launchers import run_sweep

ROOT = Path(__file__).resolve().parents[2]


def test_two_run_sweep_of_the_tiny_cpu_config_runs_and_a_rerun_skips_both(tiny_model_dir, tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "tiny-two",
        "base_config": str(ROOT / "configs" / "tiny-cpu.yaml"),
        "fixed": {
            "model_name_or_path": str(tiny_model_dir), "use_vllm": False, "max_steps": 1, "max_tasks": 2,
            "num_generations": 2, "per_device_train_batch_size": 2, "max_tokens_per_turn": 16,
            "max_completion_length": 32, "save_steps": 1, "report_to": "none", "dump_rollouts": 0,
        },
        "grid": {"learning_rate": [1.0e-5, 1.0e-4]},
    }))
    prefix = [sys.executable, str(ROOT / "scripts" / "train.py")]
    lines: list[str] = []
    codes = run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lines.append)
    assert codes == {"learning_rate1e-05": 0, "learning_rate0.0001": 0}, "\n".join(lines)
    for name in codes:
        run_dir = tmp_path / "runs" / name
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        out = Path(config["output_dir"])
        summary = json.loads((out / "run_summary.json").read_text())
        assert summary["global_step"] == 1 and (out / "checkpoint-1").is_dir()
    again = run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lines.append)
    assert again == {"learning_rate1e-05": None, "learning_rate0.0001": None}
    assert "skipped (finished)" in "\n".join(lines)
