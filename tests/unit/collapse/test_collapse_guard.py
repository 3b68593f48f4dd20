"""Collapse guard units: repetition signals on token lists, the detector on synthetic metric series, config keys,
checkpoint rotation and the learning-rate rescale (the end-to-end runs are in tests/integration/test_collapse_run.py and
tests/integration/test_learning.py)."""

from __future__ import annotations

import json
import math
import random

import pytest

from arc_trl.collapse.checkpoints import rotate_keeping
from arc_trl.collapse.detector import (
    COLLAPSE,
    OK,
    WARN,
    CollapseDetector,
    DetectorSettings,
    SignalRule,
    rules_with_overrides,
)
from arc_trl.collapse.signals import model_turns, repeated_token_mask, repetition_stats


# ---------------------------------------------------------------------------------------------------- signals
def test_repeated_token_mask_marks_tokens_inside_earlier_ngrams():
    tokens = [1, 2, 3, 4, 9, 1, 2, 3, 4, 8]  # the 4-gram 1 2 3 4 comes back at position 5
    assert repeated_token_mask(tokens, 4).tolist() == [False] * 5 + [True] * 4 + [False]
    assert not repeated_token_mask(list(range(50)), 4).any()
    assert not repeated_token_mask([7, 7, 7], 4).any()  # shorter than n


def test_a_loop_scores_near_one_and_its_length():
    loop = [5, 6, 7] * 100  # "in a pattern in a pattern ..."
    stats = repetition_stats([loop], 4)
    assert stats.tokens == 300 and stats.repeated == 297  # all but the first 3 tokens
    assert stats.longest_run == 297


def test_repetition_is_per_model_turn_and_skips_environment_tokens():
    turn = [1, 2, 3, 4, 5]
    env = [1, 2, 3, 4, 5]  # the environment echoing the same tokens is not model repetition
    completion = turn + env + turn  # the second turn repeats the first: normal REPL work, not a loop
    env_mask = [1] * 5 + [0] * 5 + [1] * 5
    turns = model_turns(completion, env_mask)
    assert turns == [turn, turn]
    assert model_turns(completion, env_mask, [(0, 5), (10, 15)]) == [turn, turn]
    assert repetition_stats(turns, 4).repeated == 0


def test_random_text_has_almost_no_repetition():
    rng = random.Random(0)
    tokens = [rng.randrange(5000) for _ in range(2000)]
    assert repeated_token_mask(tokens, 4).mean() < 0.01


# ---------------------------------------------------------------------------------------------------- detector
def _healthy(step: int, rng: random.Random) -> dict[str, float]:
    return {
        "reward": 1.0 + 0.01 * step + rng.gauss(0, 0.2),
        "entropy": 0.8 + rng.gauss(0, 0.05),
        "episode/repeat_frac": 0.10 + rng.gauss(0, 0.02),
        "episode/repeat_run": 12 + rng.gauss(0, 2),
        "episode/truncated_rate": max(0.0, 0.1 + rng.gauss(0, 0.05)),
        "episode/model_tokens": 300 + rng.gauss(0, 20),
        "episode/code_parsed_rate": 0.9 + rng.gauss(0, 0.03),
        "episode/submit_rate": 0.8 + rng.gauss(0, 0.05),
        "loss": rng.gauss(0, 0.01),
        "grad_norm": 1.0,
    }


def _collapsing(step: int, rng: random.Random, t: float) -> dict[str, float]:
    """The seeds' collapse, t in [0, 1]: longer, truncated, repetitive, fewer SUBMITs, lower entropy."""
    row = _healthy(step, rng)
    row.update({
        "episode/repeat_frac": 0.10 + 0.8 * t,
        "episode/repeat_run": 12 + 500 * t,
        "episode/truncated_rate": 0.1 + 0.9 * t,
        "episode/model_tokens": 300 + 700 * t,
        "episode/submit_rate": 0.8 * (1 - t),
        "entropy": 0.8 * (1 - 0.9 * t),
        "reward": 1.0 - 1.5 * t,
    })
    return row


SMALL = DetectorSettings(baseline_steps=10, window=5)


def test_healthy_series_is_never_flagged():
    for seed in range(20):
        rng = random.Random(seed)
        detector = CollapseDetector(SMALL)
        labels = [detector.update(step, _healthy(step, rng)).label for step in range(1, 301)]
        assert set(labels) == {OK}, (seed, [(i + 1, x) for i, x in enumerate(labels) if x != OK][:5])


def test_collapse_is_flagged_within_a_bounded_number_of_steps_with_reasons():
    rng = random.Random(0)
    detector = CollapseDetector(SMALL)
    for step in range(1, 41):
        assert detector.update(step, _healthy(step, rng)).label == OK
    verdicts = []
    for k in range(1, 21):  # the collapse sets in over 10 steps
        step = 40 + k
        verdicts.append(detector.update(step, _collapsing(step, rng, min(1.0, k / 10))))
    first_warn = next(v.step for v in verdicts if v.label != OK)
    first_collapse = next(v.step for v in verdicts if v.label == COLLAPSE)
    assert first_warn < first_collapse <= 48, [(v.step, v.label) for v in verdicts]
    fired = {f.rule for f in verdicts[-1].fired if f.level == COLLAPSE}
    assert {"episode/truncated_rate:up", "episode/model_tokens:up", "episode/repeat_frac:up"} <= fired
    reasons = verdicts[-1].reasons()
    assert "episode/truncated_rate" in reasons and "vs baseline" in reasons
    assert json.loads(json.dumps(verdicts[-1].to_dict()))["label"] == COLLAPSE


def test_one_signal_alone_warns_but_does_not_collapse():
    detector = CollapseDetector(SMALL)
    for step in range(1, 11):
        detector.update(step, {"episode/model_tokens": 100.0, "episode/truncated_rate": 0.0})
    for step in range(11, 20):
        verdict = detector.update(step, {"episode/model_tokens": 1000.0, "episode/truncated_rate": 0.0})
    assert verdict.label == WARN and [f.rule for f in verdict.fired] == ["episode/model_tokens:up"]
    assert verdict.fired[0].level == COLLAPSE  # at collapse level, but min_signals is 2


def test_baseline_phase_is_ok_but_nonfinite_loss_is_collapse_at_once():
    detector = CollapseDetector(SMALL)
    verdict = detector.update(1, {"loss": 0.1, "episode/truncated_rate": 1.0})
    assert verdict.label == OK and not verdict.baseline_ready
    verdict = detector.update(2, {"loss": math.nan})
    assert verdict.label == COLLAPSE and verdict.fired[0].rule == "loss:nonfinite"


def test_missing_metrics_keep_their_rules_silent():
    detector = CollapseDetector(SMALL)
    for step in range(1, 30):
        verdict = detector.update(step, {"reward": 1.0})
    assert verdict.label == OK and set(verdict.values) == {"reward"}


def test_rule_scores_in_each_unit():
    assert SignalRule("x", "up", "delta", 0.1, 0.2).score(0.5, 0.2, 0.0) == pytest.approx(0.3)
    assert SignalRule("x", "down", "ratio", 2, 4).score(0.1, 0.8, 0.0) == pytest.approx(8.0)
    assert SignalRule("x", "down", "zscore", 2, 4, floor=0.1).score(0.0, 1.0, 0.01) == pytest.approx(10.0)


def test_threshold_overrides_per_key_and_rule_name():
    rules = {r.name: r for r in rules_with_overrides({
        "episode/truncated_rate": {"collapse": 0.6},
        "entropy:up": None,
        "teacher_kl": {"direction": "up", "change": "ratio", "warn": 3, "collapse": 6},
    })}
    assert rules["episode/truncated_rate:up"].collapse == 0.6 and rules["episode/truncated_rate:up"].warn == 0.2
    assert "entropy:up" not in rules and "entropy:down" in rules
    assert rules["teacher_kl:up"].change == "ratio"
    with pytest.raises(ValueError, match="nope"):
        rules_with_overrides({"nope": None})
    with pytest.raises(ValueError, match="warn <= collapse"):
        rules_with_overrides({"reward": {"warn": 9.0}})
    with pytest.raises(ValueError, match="new rule and needs"):
        rules_with_overrides({"teacher_kl": {"warn": 1, "collapse": 2}})


def test_config_keys_are_validated_with_clear_errors():
    from arc_trl.config import ArcConfig

    arc = ArcConfig(collapse_guard="rollback", collapse_thresholds='{"reward": {"collapse": 10}}')
    assert arc.collapse_thresholds == {"reward": {"collapse": 10}}
    with pytest.raises(ValueError, match="collapse_guard='restart' is not one of off, warn, stop, rollback"):
        ArcConfig(collapse_guard="restart")
    with pytest.raises(ValueError, match="collapse_thresholds is not valid JSON"):
        ArcConfig(collapse_thresholds="{reward")
    with pytest.raises(ValueError, match="collapse_lr_scale"):
        ArcConfig(collapse_lr_scale=2.0)


# ---------------------------------------------------------------------------------------------------- checkpoints
def test_rotation_keeps_the_last_ok_checkpoint(tmp_path):
    for step in (2, 4, 6, 8):
        (tmp_path / f"checkpoint-{step}").mkdir()
    deleted = rotate_keeping(tmp_path, 2, {str(tmp_path / "checkpoint-2")})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-8"]
    assert [d.rsplit("/", 1)[1] for d in deleted] == ["checkpoint-4", "checkpoint-6"]


def test_scale_learning_rate_rescales_optimizer_and_scheduler():
    import torch

    from arc_trl.collapse.callback import scale_learning_rate

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    scale_learning_rate(optimizer, scheduler, 0.25)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(2.5e-4)
    optimizer.step()
    scheduler.step()
    assert scheduler.get_last_lr() == [pytest.approx(2.5e-4)]


# ---------------------------------------------------------------------------------------------------- the loop
class _FakeTrainer:
    """Just what `attach_collapse_guard` and `train_with_guard` touch (as `ArcGRPOTrainer.__init__` and `.train` call
    them): `train_once` 'trains' by feeding scripted metric rows to the callbacks, the rows of its k-th call being
    `rows_per_attempt[k]` (the last one repeats), and records the learning rate each call starts with."""

    def __init__(self, rows_per_attempt, output_dir, saves, arc):
        from types import SimpleNamespace

        from transformers import TrainerControl, TrainerState

        self.rows_per_attempt, self.output_dir, self.saves, self.arc_config = rows_per_attempt, output_dir, saves, arc
        self.state, self.control = TrainerState(), TrainerControl()
        self.callback_handler = SimpleNamespace(callbacks=[])
        self.accelerator = SimpleNamespace(is_main_process=True, wait_for_everyone=lambda: None)
        self.args = SimpleNamespace(output_dir=str(output_dir), learning_rate=1e-3)
        self.base_learning_rate = self.args.learning_rate
        self.resumed_from, self.learning_rates, self.saved_models, self.model = [], [], [], None
        self._last_loaded_step, self._step, self._buffered_inputs = -1, 0, None

    def train_once(self, resume_from_checkpoint=None):
        rows = self.rows_per_attempt[min(len(self.resumed_from), len(self.rows_per_attempt) - 1)]
        self.resumed_from.append(resume_from_checkpoint)
        self.learning_rates.append(self.args.learning_rate)
        start = int(resume_from_checkpoint.rsplit("-", 1)[1]) if resume_from_checkpoint else 0
        guard = self.callback_handler.callbacks[0]
        self.state.global_step = start
        self.state.log_history = [{"step": s, **rows[s - 1]} for s in range(1, start + 1)]
        self.control.should_training_stop = False  # as CallbackHandler.on_train_begin does
        guard.on_train_begin(self.args, self.state, self.control)
        while self.state.global_step < len(rows) and not self.control.should_training_stop:
            self.state.global_step += 1
            self._step += 1
            self._last_loaded_step = self.state.global_step - 1  # generation synced the weights of the last step
            logs = dict(rows[self.state.global_step - 1])
            self.state.log_history.append({"step": self.state.global_step, **logs})
            self.control.should_save = self.state.global_step in self.saves
            guard.on_log(self.args, self.state, self.control, logs)
            if self.control.should_save:
                self._save_checkpoint(self.model, None)
                guard.on_save(self.args, self.state, self.control)

    def _save_checkpoint(self, model, trial):
        (self.output_dir / f"checkpoint-{self.state.global_step}").mkdir(parents=True, exist_ok=True)

    def save_model(self, path=None):
        self.saved_models.append(path)

    def save_state(self):
        pass


def _guarded(tmp_path, action, rows_per_attempt, max_rollbacks=2, saves=(2, 4, 6)):
    """A fake trainer with the guard attached, and its `train(resume)`."""
    from arc_trl.collapse.loop import attach_collapse_guard, train_with_guard
    from arc_trl.config import ArcConfig

    arc = ArcConfig(collapse_guard=action, collapse_baseline_steps=3, collapse_window=1,
                    collapse_max_rollbacks=max_rollbacks, collapse_lr_scale=0.5)
    trainer = _FakeTrainer(rows_per_attempt, tmp_path, set(saves), arc)
    trainer.collapse_guard = attach_collapse_guard(trainer)
    assert trainer.callback_handler.callbacks == [trainer.collapse_guard]
    return trainer, lambda resume=None: train_with_guard(trainer, resume, trainer.train_once)


def _events(path):
    return [json.loads(line) for line in (path / "collapse_guard.jsonl").read_text().splitlines()]


HEALTHY_ROW = {"reward": 1.0, "episode/truncated_rate": 0.1, "episode/model_tokens": 100.0}
BAD_ROW = {"reward": 1.0, "episode/truncated_rate": 0.9, "episode/model_tokens": 500.0}


def test_stop_writes_the_reason_and_exits_3(tmp_path):
    from arc_trl.collapse.rollback import COLLAPSE_EXIT_CODE, CollapseStopped

    rows = [HEALTHY_ROW] * 4 + [BAD_ROW] * 4
    trainer, run = _guarded(tmp_path, "stop", [rows])
    with pytest.raises(CollapseStopped) as stopped:
        run()
    assert stopped.value.code == COLLAPSE_EXIT_CODE == 3
    report = json.loads((tmp_path / "collapse_guard_stop.json").read_text())
    # checkpoint-4 holds the weights that step 5's episodes were sampled from: rejected; checkpoint-2 was confirmed
    assert report["step"] == 5 and report["exit_code"] == 3 and report["last_ok_checkpoint"].endswith("checkpoint-2")
    assert "episode/truncated_rate" in report["reason"] and "episode/model_tokens" in report["reason"]
    assert trainer.state.global_step == 5
    assert trainer.saved_models == [str(tmp_path / "collapse_guard" / "collapsed-step-5")]
    assert not (tmp_path / "checkpoint-6").exists()  # the collapsed state is never checkpoint-N
    assert not (tmp_path / "checkpoint-0").exists()  # the initial checkpoint is for rollback mode only
    records = _events(tmp_path)
    assert [r["label"] for r in records if r["event"] == "step"] == ["ok"] * 4 + ["collapse"]


def test_rollback_resumes_the_same_trainer_from_the_last_ok_checkpoint_with_a_smaller_lr_then_stops(tmp_path):
    from arc_trl.collapse.rollback import CollapseStopped

    bad_after_4 = [HEALTHY_ROW] * 4 + [BAD_ROW] * 4
    recovers = [HEALTHY_ROW] * 8
    trainer, run = _guarded(tmp_path, "rollback", [bad_after_4, recovers])
    run()
    assert trainer.resumed_from == [None, str(tmp_path / "checkpoint-2")]  # one trainer: trained again in place
    assert (tmp_path / "collapse_guard" / "discarded" / "rollback-1" / "checkpoint-4").is_dir()
    assert trainer.learning_rates == [1e-3, 5e-4] and trainer.args.learning_rate == 5e-4
    assert trainer.state.global_step == 8 and trainer.collapse_rollbacks == 1
    assert trainer.saved_models == []  # a finished run's model is saved by its caller (train_entry), not the loop
    events = _events(tmp_path)
    rollback = next(e for e in events if e["event"] == "rollback")
    assert rollback["from_step"] == 5 and rollback["lr_multiplier"] == 0.5
    begin = [e for e in events if e["event"] == "train_begin"][1]
    assert begin["step"] == 2 and not begin["baseline_ready"]  # rebuilt from the checkpoint's 2 steps (of 3)
    assert begin["attempt"] == 1 and begin["lr_multiplier"] == 0.5
    assert begin["resume_from"] == str(tmp_path / "checkpoint-2")
    confirmed = [e["step"] for e in events if e["event"] == "checkpoint" and e["label"] == "ok"]
    assert confirmed == [2, 4, 6]  # 2 by step 3 of attempt 0; 4 and 6 by attempt 1
    initial = next(e for e in events if e["event"] == "save")
    assert initial["step"] == 0 and initial["label"] == "ok" and (tmp_path / "checkpoint-0").is_dir()

    # a run that collapses every time: max_rollbacks rollbacks, then a stop with the reason
    trainer, run = _guarded(tmp_path / "again", "rollback", [bad_after_4], max_rollbacks=2)
    with pytest.raises(CollapseStopped, match="2 rollback"):
        run()
    assert len(trainer.resumed_from) == 3 and trainer.learning_rates == [1e-3, 5e-4, 2.5e-4]
    assert trainer.collapse_rollbacks == 2


def test_rollback_before_any_confirmed_save_goes_back_to_the_initial_weights(tmp_path):
    """A collapse at step 2 (issue 24) with the first save far away: checkpoint-0, saved at train begin, is the
    target; the generation state is reset so that vLLM gets the restored weights."""
    early = [HEALTHY_ROW] + [BAD_ROW] * 7
    trainer, run = _guarded(tmp_path, "rollback", [early, [HEALTHY_ROW] * 8], saves=())
    run()
    assert trainer.resumed_from == [None, str(tmp_path / "checkpoint-0")]
    events = _events(tmp_path)
    assert next(e for e in events if e["event"] == "collapse")["step"] == 2
    assert next(e for e in events if e["event"] == "rollback")["resume_from"] == str(tmp_path / "checkpoint-0")
    begins = [e for e in events if e["event"] == "train_begin"]
    assert [(b["step"], b["resume_from"]) for b in begins] == [(0, None), (0, str(tmp_path / "checkpoint-0"))]
    assert [e["step"] for e in events if e["event"] == "save"] == [0]  # not saved again when resuming from it
    assert trainer.state.global_step == 8 and trainer.collapse_rollbacks == 1


def test_prepare_rollback_resets_the_generation_state_and_frees_the_optimizer_state():
    import torch

    from arc_trl.collapse.loop import prepare_rollback

    class Trainer:
        pass

    trainer = Trainer()
    trainer.model = torch.nn.Linear(2, 1)
    trainer.optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=1e-3)
    trainer.model(torch.ones(1, 2)).sum().backward()
    trainer.optimizer.step()
    trainer._last_loaded_step, trainer._step, trainer._buffered_inputs = 3, 7, [{"x": 1}]
    prepare_rollback(trainer)
    assert trainer._last_loaded_step == -1 and trainer._step == 0 and trainer._buffered_inputs is None
    assert not trainer.optimizer.state and all(p.grad is None for p in trainer.model.parameters())


def test_a_restarted_run_keeps_the_lr_and_rollback_count_of_its_checkpoint(tmp_path):
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    (checkpoint / "collapse_guard.json").write_text(json.dumps({"label": "ok", "lr_multiplier": 0.25, "rollbacks": 2}))
    trainer, run = _guarded(tmp_path, "rollback", [[HEALTHY_ROW] * 6])
    run(str(checkpoint))
    assert trainer.learning_rates == [pytest.approx(2.5e-4)] and trainer.collapse_rollbacks == 2
    assert not (tmp_path / "checkpoint-0").exists()  # a restart has its checkpoint: no initial one


def test_a_second_train_call_scales_the_base_learning_rate_not_the_scaled_one(tmp_path):
    """`trainer.train()` after a rolled-back `train()` (Python): `resume_from_checkpoint=True` is the last checkpoint,
    whose multiplier (0.5) applies to the rate the trainer was built with, not to the one the rollback left in args."""
    bad_after_4 = [HEALTHY_ROW] * 4 + [BAD_ROW] * 4
    trainer, run = _guarded(tmp_path, "rollback", [bad_after_4, [HEALTHY_ROW] * 8])
    run()
    assert trainer.args.learning_rate == 5e-4
    run(True)
    assert trainer.resumed_from[-1] == str(tmp_path / "checkpoint-6")  # the last one (8 steps: saves at 2, 4, 6)
    assert trainer.learning_rates == [1e-3, 5e-4, 5e-4] and trainer.collapse_rollbacks == 1
    with pytest.raises(ValueError, match="No valid checkpoint found"):
        _guarded(tmp_path / "empty", "warn", [[HEALTHY_ROW]])[1](True)


def test_an_off_guard_attaches_no_callback(tmp_path):
    from arc_trl.collapse.loop import attach_collapse_guard
    from arc_trl.config import ArcConfig

    trainer = _FakeTrainer([[HEALTHY_ROW]], tmp_path, set(), ArcConfig(collapse_guard="off"))
    assert attach_collapse_guard(trainer) is None and trainer.callback_handler.callbacks == []


def test_a_sweep_summary_names_a_collapse_stop():
    from arc_trl.launch.launchers import RunResult

    assert "collapse guard stop" in RunResult("r", "new", exit_code=3, collapse_stop=True).describe()
    assert RunResult("r", "new", exit_code=3).describe().startswith("FAILED (exit 3) ")  # exit 3 without the file
    assert RunResult("r", "new", exit_code=1).describe().startswith("FAILED (exit 1)")
