"""The SmolLM2 experiment's held-out check, committed as results/gpu_learning_smollm2/heldout_check.json (its machines'
stage selections never ran it) and read by the summary (arc_experiments/figures/smollm2.py), is what the experiment's
configs give: recomputed here (~40 s of CPU: the synthetic SFT, RL and validation sets are generated)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]  # the checkout


@pytest.mark.slow
def test_the_committed_smollm2_heldout_check_is_what_its_configs_give(tmp_path, monkeypatch):
    from arc_experiments.learning import heldout_check

    monkeypatch.chdir(ROOT)  # the profile names its configs relative to the checkout
    out = tmp_path / "heldout_check.json"
    assert heldout_check.main(["--configs", "configs/gpu/smollm2", "--out", str(out)]) == 0
    assert out.read_text() == (ROOT / "results" / "gpu_learning_smollm2" / "heldout_check.json").read_text()
