"""The collapse guard on a real (tiny, CPU) GRPO run: a learning rate far too high breaks the model, the guard labels
the first broken step `collapse` and `rollback` resumes from the last ok checkpoint with a smaller learning rate,
after which the signals are back at their baseline (docs/collapse.md, "Shown to work"). The rollback's learning-rate
scale is extreme (1e-6) so that the recovery is certain: the point is the mechanics (detect, reject the checkpoint
holding the bad update, resume from the one before it with every piece of state, continue), not a tuned lr.

Provocation: learning_rate 1.0 with weight_decay 1.0 (AdamW's decoupled decay then scales every weight by 1 - lr,
which breaks the model even when GRPO's advantages are all zero), warmed up over 2 steps so that steps 1-2 (the
baseline) are healthy: the first update has learning rate 0, the second 0.5. The memorised tiny model writes code and
SUBMITs in healthy episodes, so a broken one shows up in several signals at once.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from arc_trl.train_entry import main

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml")


@pytest.mark.slow
def test_high_learning_rate_collapse_is_detected_and_rolled_back(memorized_model_dir, memorized_task, tmp_path):
    out = tmp_path / "run"
    try:
        _run_and_check(memorized_model_dir, memorized_task, tmp_path, out)
    finally:  # ARC_TRL_KEEP_COLLAPSE_RUN=DIR keeps the run's guard log for docs/collapse.md's plot
        if os.environ.get("ARC_TRL_KEEP_COLLAPSE_RUN") and (out / "collapse_guard.jsonl").exists():
            keep = Path(os.environ["ARC_TRL_KEEP_COLLAPSE_RUN"])
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(out / "collapse_guard.jsonl", keep)


def _run_and_check(memorized_model_dir, memorized_task, tmp_path, out) -> None:
    from arc_trl.data import save_tasks_folder

    data = save_tasks_folder([memorized_task], tmp_path / "tasks")
    summary = main([
        "--config", CONFIG, "--model_name_or_path", str(memorized_model_dir), "--output_dir", str(out),
        "--dataset", str(data), "--use_vllm", "false", "--report_to", "none", "--dump_rollouts", "0",
        "--num_generations", "4", "--per_device_train_batch_size", "4",
        "--max_tokens_per_turn", "400", "--max_completion_length", "1200", "--max_turns", "3",
        "--max_prompt_tokens", "1600", "--max_steps", "5", "--save_steps", "1", "--save_total_limit", "2",
        "--learning_rate", "1.0", "--weight_decay", "1.0", "--lr_scheduler_type", "constant_with_warmup",
        "--warmup_steps", "2",
        "--collapse_guard", "rollback", "--collapse_baseline_steps", "2", "--collapse_window", "1",
        "--collapse_lr_scale", "1e-6", "--collapse_max_rollbacks", "1",
    ])
    assert summary["global_step"] == 5 and summary["collapse_rollbacks"] == 1

    records = [json.loads(line) for line in (out / "collapse_guard.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["event"] == "step"]
    first = [r for r in steps if r["attempt"] == 0]
    assert [r["label"] for r in first] == ["ok", "ok", "collapse"], [(r["step"], r["label"]) for r in first]
    collapse = first[-1]
    assert collapse["step"] == 3  # the first step sampled after the bad update: detected at once
    fired = [f for f in collapse["fired"] if f["level"] == "collapse"]
    assert len(fired) >= 2, collapse["fired"]
    rollback = next(r for r in records if r["event"] == "rollback")
    # checkpoint-2 holds the weights of the bad update (step 3 sampled from them): rejected; checkpoint-1 is the last ok
    assert rollback["from_step"] == 3 and rollback["resume_from"] == str(out / "checkpoint-1")

    second = [r for r in steps if r["attempt"] == 1]
    # the run goes on from step 2; no step collapses again (a warn is allowed: 4 episodes per step are noisy)
    assert [r["step"] for r in second] == [2, 3, 4, 5] and all(r["label"] != "collapse" for r in second), second
    baseline = {k: sum(r["raw"][k] for r in first[:2]) / 2 for k in first[0]["raw"]}
    states = {f["rule"] for f in fired if f["kind"] == "state"}
    assert {"no_valid_left", "all_truncated", "reward_at_floor"} <= states, collapse["fired"]
    assert not states & {f["rule"] for f in second[-1]["fired"]}, second[-1]["fired"]  # no state rule fires any more
    # Every behaviour signal that fired at collapse level is back: under half its bad-way deviation. Entropy is left
    # out: the memorised model's healthy episodes differ in how many tokens leave its memorised answer, so the
    # entropy of 4 episodes moves with the sampled paths, and it falls the most when every episode reproduces the
    # answer (seen after the rollback: reward 10 against a baseline of 7.5, entropy 0.017 against 0.16, labelled
    # `warn` because the detector wants more than one signal). The behaviour signals are far from their threshold
    # either way: truncation 1 vs 0.25, code parsed 0 vs 1, submissions 0 vs 0.75, repeats 0.99 vs 0.14.
    for rule in (f for f in fired if f["kind"] != "state" and not f["rule"].startswith("entropy:")):
        key, direction = rule["rule"].rsplit(":", 1)
        sign = 1.0 if direction == "up" else -1.0
        after, during = (sign * (r["raw"][key] - baseline[key]) for r in (second[-1], collapse))
        assert after < during / 2, (key, second[-1]["raw"][key], collapse["raw"][key], baseline[key])

    state = json.loads((out / "trainer_state.json").read_text())
    lrs = {h["step"]: h["learning_rate"] for h in state["log_history"] if "reward" in h}
    assert lrs[5] == pytest.approx(1e-6)  # 1.0 x collapse_lr_scale: the restored optimizer and scheduler rescaled
    initial = next(r for r in records if r["event"] == "save")  # rollback mode: checkpoint-0 first, ok at once
    assert initial["step"] == 0 and initial["label"] == "ok"
    judged = [r for r in records if r["event"] == "checkpoint"]
    assert [(r["step"], r["label"]) for r in judged[:2]] == [(1, "ok"), (2, "rejected")]
    last_ok = max(r["step"] for r in judged if r["label"] == "ok")
    kept = sorted(p.name for p in out.glob("checkpoint-*"))
    assert f"checkpoint-{last_ok}" in kept and "checkpoint-5" in kept and len(kept) <= 2, kept  # save_total_limit 2
    assert not (out / "collapse_guard_stop.json").exists() and (out / "run_summary.json").exists()
