"""GPU checks (skipped without CUDA; CI has none). The full GPU runs are `python -m arc_experiments.gpu STAGE --out DIR`
(lab/arc_experiments/gpu; `--list` names the stages)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_trainer_step_on_gpu_small_shape(tmp_path):
    out = tmp_path / "bench.json"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_trainer_bench.py"), "--shape", "qwen3-0.6b", "--seq-len", "512",
         "--prompt-len", "128", "--global-batch", "8", "--micro-batch", "4", "--steps", "2", "--out", str(out)],
        check=True, cwd=ROOT, env={"CUDA_VISIBLE_DEVICES": "0", **__import__("os").environ},
    )
    result = json.loads(out.read_text())
    assert result["step_time_s"] > 0 and result["peak_mem_gib_per_gpu"][0] > 1.0
    assert 0 < result["mfu"] < 1


def test_unsloth_guard_is_explicit():
    from arc_trl.integrations.unsloth_support import UnslothUnavailableError, check_unsloth_available

    try:
        import unsloth  # noqa: F401
    except ImportError:
        with pytest.raises(UnslothUnavailableError, match="not installed"):
            check_unsloth_available()
