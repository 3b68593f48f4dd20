"""Issue 24, item 1: early and sudden collapses are labelled within 2 logged steps of their onset with the default
settings, the baseline never absorbs a collapse, the slow collapse is still caught and healthy runs stay ok.

Metric rows are synthetic (shaped on the GPU run of the issue) or replayed from real logs (results/collapse_logs/,
results/gpu_learning_results.json)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from arc_trl.collapse.detector import COLLAPSE, OK, WARN, CollapseDetector, DetectorSettings

RESULTS = Path(__file__).resolve().parents[3] / "results"


def _healthy_gpu(rng: random.Random, episodes: int = 64) -> dict[str, float]:
    """A healthy step of configs/gpu/learning/grpo-opd.yaml's GRPO-only run (results/gpu_learning_results.json means),
    with the binomial noise of `episodes` episodes per step."""

    def rate(p: float) -> float:
        return sum(rng.random() < p for _ in range(episodes)) / episodes

    valid = rate(0.80)
    return {
        "reward": 1.76 + rng.gauss(0, 0.35),
        "reward_min": rng.choice([-1.0, 0.0]),
        "reward_max": rng.choice([9.0, 9.8, 10.0]),
        "entropy": 0.10 + rng.gauss(0, 0.015),
        "episode/valid_prediction_rate": valid,
        "episode/submit_rate": valid,
        "episode/truncated_rate": rate(0.05),
        "episode/code_parsed_rate": rate(0.98),
        "episode/repeat_frac": 0.087 + rng.gauss(0, 0.01),
        "episode/repeat_run": 9.6 + rng.gauss(0, 1.5),
        "episode/model_tokens": 260 + rng.gauss(0, 15),
        "loss": rng.gauss(0.1, 0.05),
        "grad_norm": 0.27 + abs(rng.gauss(0, 0.05)),
    }


# The issue's GPU run, step 1 and step 2 on (it stayed so for 36 steps): learning_rate 1e-4, GRPO only
GPU_STEP_1 = {"reward": 2.26, "episode/valid_prediction_rate": 0.86, "episode/truncated_rate": 0.05,
              "entropy": 0.07, "episode/repeat_frac": 0.07}
GPU_COLLAPSED = {"reward": -0.58, "episode/valid_prediction_rate": 0.0, "episode/truncated_rate": 0.97,
                 "entropy": 1.2, "episode/repeat_frac": 0.68}


def _collapsed_gpu(rng: random.Random) -> dict[str, float]:
    row = _healthy_gpu(rng)
    row.update(GPU_COLLAPSED)
    row.update({"reward_min": -1.0, "reward_max": 0.0, "episode/submit_rate": 0.02,
                "episode/code_parsed_rate": 0.45, "episode/model_tokens": 780 + rng.gauss(0, 20),
                "episode/repeat_run": 150 + rng.gauss(0, 20)})
    return row


def _labels(rows, settings=None) -> list[str]:
    detector = CollapseDetector(settings or DetectorSettings())
    return [detector.update(step, row).label for step, row in enumerate(rows, start=1)]


def test_the_issue_collapse_at_step_2_is_labelled_by_step_3_with_default_settings():
    """The run of issue 24: healthy step 1, collapsed from step 2 for 36 steps; only the metrics the issue quotes."""
    labels = _labels([GPU_STEP_1] + [GPU_COLLAPSED] * 36)
    assert labels[0] == OK
    first = labels.index(COLLAPSE) + 1 if COLLAPSE in labels else None
    assert first is not None and first <= 3, list(enumerate(labels, start=1))
    assert set(labels[first - 1:]) == {COLLAPSE}  # stays labelled while it stays collapsed (no baseline absorbs it)


def test_the_issue_collapse_fires_the_state_rules_with_their_reasons():
    rng = random.Random(0)
    detector = CollapseDetector()
    detector.update(1, _healthy_gpu(rng))
    verdict = detector.update(2, _collapsed_gpu(rng))
    assert verdict.label == COLLAPSE
    fired = {f.rule for f in verdict.fired if f.level == COLLAPSE}
    assert {"no_valid_left", "all_truncated", "reward_at_floor"} <= fired, verdict.reasons()
    assert "valid" in verdict.reasons() and "truncated" in verdict.reasons()


@pytest.mark.parametrize("onset", [2, 3, 5, 10, 20, 21, 30, 100, 400])
def test_a_sudden_collapse_at_any_step_is_labelled_within_two_logged_steps(onset):
    rng = random.Random(onset)
    rows = [_healthy_gpu(rng) for _ in range(1, onset)] + [_collapsed_gpu(rng) for _ in range(40)]
    labels = _labels(rows)
    assert set(labels[: onset - 1]) == {OK} or COLLAPSE not in labels[: onset - 1], labels[: onset - 1]
    assert COLLAPSE in labels[onset - 1: onset + 1], (onset, labels[onset - 2: onset + 3])
    assert set(labels[onset:]) == {COLLAPSE}  # level 2 for as long as the collapse lasts


def test_the_baseline_never_absorbs_a_collapse():
    rng = random.Random(1)
    detector = CollapseDetector()
    detector.update(1, _healthy_gpu(rng))
    for step in range(2, 60):  # collapsed for longer than baseline_steps + window
        verdict = detector.update(step, _collapsed_gpu(rng))
        assert verdict.label == COLLAPSE, (step, verdict.reasons())
    assert detector.baseline is None  # only healthy steps count: 1 of the 20 it needs
    # the run recovers: the baseline fills with healthy steps only
    for step in range(60, 90):
        detector.update(step, _healthy_gpu(rng))
    valid_mean, _ = detector.baseline["episode/valid_prediction_rate"]
    assert valid_mean > 0.6


def test_a_collapse_within_the_baseline_is_not_learned_by_it():
    """Healthy for 5 steps, collapsed from step 6: the label stays collapse past step 20 (the old baseline's end)."""
    rng = random.Random(2)
    rows = [_healthy_gpu(rng) for _ in range(5)] + [_collapsed_gpu(rng) for _ in range(40)]
    labels = _labels(rows)
    assert labels[:5] == [OK] * 5 and set(labels[5:]) == {COLLAPSE}, labels


def _creeping(step: int, rng: random.Random, start: int, length: int) -> dict[str, float]:
    """The research log's slow collapse: over `length` steps, completions grow towards the cap, repeat and get cut."""
    t = min(1.0, max(0.0, (step - start) / length))
    row = _healthy_gpu(rng)
    row["episode/model_tokens"] *= 1 + 2.5 * t
    row["episode/repeat_frac"] += 0.6 * t
    row["episode/repeat_run"] *= 1 + 15 * t
    row["episode/truncated_rate"] = min(1.0, row["episode/truncated_rate"] + 0.85 * t)
    row["episode/submit_rate"] *= 1 - 0.9 * t
    row["episode/valid_prediction_rate"] *= 1 - 0.9 * t
    row["entropy"] *= 1 - 0.8 * t
    row["reward"] -= 2.0 * t
    return row


def test_the_slow_collapse_over_hundreds_of_steps_is_still_caught():
    rng = random.Random(3)
    start, length = 200, 400
    rows = [_creeping(step, rng, start, length) for step in range(1, 801)]
    labels = _labels(rows)
    assert COLLAPSE not in labels[:start], [i + 1 for i, x in enumerate(labels[:start]) if x != OK]
    first_warn = next(i + 1 for i, x in enumerate(labels) if x != OK)
    first_collapse = labels.index(COLLAPSE) + 1
    assert start < first_warn < first_collapse < start + length, (first_warn, first_collapse)
    # caught while the run is still well short of the capped, looping end state
    assert first_collapse < start + length * 0.6, first_collapse


def test_healthy_noisy_runs_stay_ok_with_default_settings():
    for seed in range(10):
        rng = random.Random(100 + seed)
        labels = _labels([_healthy_gpu(rng, episodes=16) for _ in range(500)])
        assert COLLAPSE not in labels, (seed, [(i + 1, x) for i, x in enumerate(labels) if x != OK][:5])
        assert labels.count(OK) >= 0.99 * len(labels), (seed, [(i + 1, x) for i, x in enumerate(labels) if x != OK])


def _replay(path: Path) -> list[dict[str, float]]:
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["raw"] for r in records if r["event"] == "step" and r["attempt"] == 0]


@pytest.mark.parametrize("settings", [DetectorSettings(), DetectorSettings(baseline_steps=4, window=4)],
                         ids=["defaults", "learning-test"])
def test_the_healthy_learning_run_stays_ok(settings):
    """The 16-step CPU learning test (tests/integration/test_learning.py), replayed from its guard log."""
    labels = _labels(_replay(RESULTS / "collapse_logs" / "learning_test_healthy.jsonl"), settings)
    assert len(labels) == 16 and set(labels) == {OK}, labels


@pytest.mark.parametrize("run", ["grpo-opd", "grpo-only"])
def test_the_healthy_gpu_runs_stay_ok(run):
    """The two 40-step H100 runs of results/gpu_learning_results.json: their per-step reward and valid-prediction rate,
    the run means for the other signals."""
    training = json.loads((RESULTS / "gpu_learning_results.json").read_text())["training"][run]
    means = training["means"]
    keys = ("entropy", "episode/truncated_rate", "episode/code_parsed_rate", "episode/repeat_frac",
            "episode/repeat_run", "episode/model_tokens", "episode/submit_rate")
    rows = [{**{k: means[k] for k in keys}, "reward": reward, "episode/valid_prediction_rate": valid}
            for reward, valid in zip(training["reward"], training["valid"])]
    assert len(rows) == 40
    assert set(_labels(rows)) == {OK}


# ---------------------------------------------------------------------------------------------------- each rule
def _second_step(first: dict, second: dict, settings: DetectorSettings | None = None):
    detector = CollapseDetector(settings or DetectorSettings())
    assert detector.update(1, first).label == OK
    return detector.update(2, second)


def _fired(verdict) -> dict[str, str]:
    return {f.rule: f.level for f in verdict.fired}


def test_no_valid_left_needs_a_healthy_start_and_falls_back_on_submits():
    valid = "episode/valid_prediction_rate"
    assert _fired(_second_step({valid: 0.5}, {valid: 0.0})) == {"no_valid_left": COLLAPSE}
    assert _fired(_second_step({valid: 0.5}, {valid: 0.02}))["no_valid_left"] == COLLAPSE  # ~0: at most 0.02
    assert "no_valid_left" not in _fired(_second_step({valid: 0.5}, {valid: 0.05}))
    assert "no_valid_left" not in _fired(_second_step({valid: 0.2}, {valid: 0.0}))  # few were valid at the start
    # without valid predictions logged, SUBMITs stand in (the submit_rate:down break fires on the same metric)
    verdict = _second_step({"episode/submit_rate": 0.8}, {"episode/submit_rate": 0.0})
    assert _fired(verdict) == {"no_valid_left": COLLAPSE, "episode/submit_rate:down": COLLAPSE}
    assert verdict.label == WARN  # one metric, however many rules on it: min_signals is 2


def test_all_truncated_needs_a_start_that_was_mostly_untruncated():
    key = "episode/truncated_rate"
    assert _fired(_second_step({key: 0.5}, {key: 0.9}))["all_truncated"] == COLLAPSE
    assert "all_truncated" not in _fired(_second_step({key: 0.6}, {key: 1.0}))
    assert "all_truncated" not in _fired(_second_step({key: 0.1}, {key: 0.85}))
    assert _second_step({key: 0.1}, {key: 1.0}).label == WARN  # state and break on one metric: one signal


def test_reward_at_floor_needs_every_healthy_batch_to_have_beaten_the_mean():
    healthy = {"reward": 1.7, "reward_min": -1.0, "reward_max": 9.8}
    # issue 24's step 2 in barc: invalid answers (0) and no code (-1), none valid; not at the -1 floor, yet the bottom
    assert _fired(_second_step(healthy, {"reward": -0.58, "reward_min": -1.0, "reward_max": 0.0})) == {
        "reward_at_floor": COLLAPSE}
    assert _fired(_second_step(healthy, {"reward": -1.0, "reward_min": -1.0, "reward_max": -1.0})) == {
        "reward_at_floor": COLLAPSE}  # pinned at the floor for the whole batch
    assert not _fired(_second_step(healthy, {"reward": 0.5, "reward_min": -1.0, "reward_max": 2.0}))
    # binary reward, rare successes: healthy batches without a success are normal, so an all-fail batch is too
    detector = CollapseDetector()
    for step, best in enumerate([1.0, 0.0, 1.0, 0.0], start=1):
        detector.update(step, {"reward": 0.05 * best, "reward_min": 0.0, "reward_max": best})
    assert "reward_at_floor" not in _fired(detector.update(5, {"reward": 0.0, "reward_min": 0.0, "reward_max": 0.0}))


def test_a_break_is_judged_on_the_step_itself_against_the_healthy_level():
    detector = CollapseDetector()
    for step in range(1, 50):
        assert detector.update(step, {"episode/model_tokens": 300.0, "episode/repeat_frac": 0.1}).label == OK
    verdict = detector.update(50, {"episode/model_tokens": 700.0, "episode/repeat_frac": 0.45})
    assert verdict.label == COLLAPSE and {f.kind for f in verdict.fired} == {"break"}, verdict.reasons()
    assert "this step vs healthy" in verdict.reasons()
    # the window mean (10 steps) moved by a tenth of that: no drift rule fired
    assert verdict.values["episode/model_tokens"] == pytest.approx(340.0)


def test_a_break_below_the_collapse_threshold_only_drifts_and_a_lone_one_only_warns():
    detector = CollapseDetector()
    for step in range(1, 30):
        detector.update(step, {"episode/model_tokens": 300.0, "episode/repeat_frac": 0.1})
    verdict = detector.update(30, {"episode/model_tokens": 580.0, "episode/repeat_frac": 0.1})  # x1.93 < x2
    assert verdict.label == OK
    verdict = detector.update(31, {"episode/model_tokens": 900.0, "episode/repeat_frac": 0.1})
    assert verdict.label == WARN and _fired(verdict) == {"episode/model_tokens:up": COLLAPSE}


def test_collapsed_steps_stay_out_of_the_healthy_level_and_warned_ones_enter_it():
    detector = CollapseDetector()
    detector.update(1, {"episode/model_tokens": 100.0, "episode/truncated_rate": 0.0})
    assert detector.update(2, {"episode/model_tokens": 500.0, "episode/truncated_rate": 1.0}).label == COLLAPSE
    assert detector.healthy_level["episode/model_tokens"] == 100.0
    assert detector.update(3, {"episode/model_tokens": 300.0, "episode/truncated_rate": 0.0}).label == WARN
    assert detector.healthy_level["episode/model_tokens"] == 200.0


def test_state_rules_and_sudden_checks_can_be_tuned_or_dropped():
    from arc_trl.collapse.detector import rules_with_overrides, state_rules_with_overrides

    overrides = {"no_valid_left": None, "all_truncated": {"value": 0.95, "healthy": 0.3},
                 "reward_at_floor": {"value": 0.5}, "episode/model_tokens": {"sudden": False}}
    states = {r.name: r for r in state_rules_with_overrides(overrides)}
    assert set(states) == {"all_truncated", "reward_at_floor"}
    assert states["all_truncated"].value == 0.95 and states["all_truncated"].healthy == 0.3
    assert states["reward_at_floor"].value == 0.5
    rules = {r.name: r for r in rules_with_overrides(overrides)}  # state rule names are left to the state rules
    assert not rules["episode/model_tokens:up"].sudden and rules["episode/truncated_rate:up"].sudden
    with pytest.raises(ValueError, match="bad side"):
        state_rules_with_overrides({"all_truncated": {"value": 0.2}})
    with pytest.raises(ValueError, match="mapping of"):
        state_rules_with_overrides({"reward_at_floor": {"healthy": 1.0}})

    from arc_trl.collapse.settings import detector_settings
    from arc_trl.config import ArcConfig

    settings = detector_settings(ArcConfig(collapse_thresholds='{"no_valid_left": null}'))
    assert [r.name for r in settings.state_rules] == ["all_truncated", "reward_at_floor"]
    verdict = _second_step({"episode/valid_prediction_rate": 0.8}, {"episode/valid_prediction_rate": 0.0}, settings)
    assert verdict.label == OK
