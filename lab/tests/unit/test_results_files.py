"""The committed learning summary keeps the keys its readers use (docs/gpu_learning_summary.json points to it)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
KEYS = {"heldout_tasks", "attempts_per_task", "seeds", "student_pass1", "grpo_opd_pass1", "grpo_only_pass1",
        "teacher_pass1", "grpo_opd_minus_student_ci95", "grpo_opd_minus_grpo_only_ci95", "steps", "device", "date",
        "subject", "per_seed_pass1", "arc_agi_1"}


def test_the_gpu_learning_summary_has_its_keys_and_consistent_figures():
    summary = json.loads((ROOT / "docs" / "gpu_learning_summary.json").read_text())
    assert KEYS <= set(summary), KEYS - set(summary)
    for key in ("grpo_opd_minus_student", "grpo_opd_minus_grpo_only"):  # each mean inside its own interval
        low, high = summary[f"{key}_seed_only_ci95"]
        assert low <= summary[key] <= high
        assert summary[f"{key}_ci95"].startswith("not recomputable:")  # the arms' per-task files were not committed
    assert len(summary["seeds"]) >= 3
    arc = summary["arc_agi_1"]
    assert arc["dataset_tasks"] == 400 and arc["attempted_tasks"] <= 400
    for model in ("student", "grpo_only"):
        assert 0 <= arc[f"{model}_pass1"] <= arc[f"{model}_pass2"] <= 1  # pass@1 <= pass@2
    assert (ROOT / arc["results"]).is_dir()


CALL_LIMIT = 64 * 1024 * 1024  # what one GPU call carries: the checkout's tracked files plus what it names
BUNDLE_PART = 42_000_000  # the largest part of the GPU bundle (lab/gpu_box/queue.sh splits it so)


def test_the_checkout_fits_a_gpu_call_beside_a_bundle_part():
    """Large records are committed gzipped (arc_experiments/figures/records.py): five uncompressed learning records
    (~5.5 MB each) would leave the next GPU session unable to carry its bundle. Tracked files only: a call also
    carries untracked files git does not ignore (results copied in before their commit), so keep a margin."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: its tracked files are unknown")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    sizes = {name.decode(): (ROOT / name.decode()).stat().st_size for name in names
             if name and (ROOT / name.decode()).is_file()}
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:5]
    assert sum(sizes.values()) + BUNDLE_PART <= CALL_LIMIT, f"tracked files {sum(sizes.values())} B; largest {largest}"
