"""benchmarks/fp8_reload_check.py on this venv's vLLM: the layerwise reload that `trl_internals.requantize_on_sync`
puts around TRL's colocated loads re-quantizes vLLM's online FP8 linears exactly as a fresh load, in place, and a
plain load does not. Run through `--vllm-package` (the installed package seen through that option), the way another
vLLM's source tree (the GPU machines' 0.26) is checked on this machine; no engine is started."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_layerwise_reload_requantizes_online_fp8_linears_in_place(tmp_path):
    vllm = pytest.importorskip("vllm")
    package = Path(vllm.__file__).parent
    out = tmp_path / "reload.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fp8_reload_check.py"), "--vllm-package",
                           str(package), "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    record = json.loads(out.read_text())
    assert record["vllm"] == vllm.__version__
    assert Path(record["vllm_file"]).parent != package  # imported through the option's folder, not site-packages
    assert record["checks"] == {"fp8_weights": True, "sync0_equals_fresh": True, "sync0_kernel_tensors_kept": True,
                                "sync1_equals_fresh": True, "sync1_kernel_tensors_kept": True,
                                "forward_after_syncs_equals_first": True, "premise_weights_differ": True,
                                "plain_load_not_fresh": True}
    assert record["passed"] is True
