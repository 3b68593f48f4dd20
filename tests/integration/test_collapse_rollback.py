"""Issue 24, item 2: a rollback loads the last ok checkpoint into the same trainer (weights, optimizer and scheduler
state, global step, learning rate x collapse_lr_scale) instead of building a second trainer and, on GPU, a second
colocated vLLM engine beside the first.

Real (tiny, CPU) GRPO runs through `train_entry.main`; the collapse itself is scripted (the detector labels one
chosen step `collapse`), since the point is the state after the rollback, not the provocation
(tests/integration/test_collapse_run.py provokes a real collapse). A probe callback, last in the list (after the guard has
rescaled the learning rate), records the trainer's state at the beginning of each `train()` call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

import arc_trl.trainer
from arc_trl.collapse.detector import COLLAPSE, CollapseDetector, Firing, Verdict
from arc_trl.train_entry import main

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "tiny-cpu.yaml")
BASE_LR, SCALE = 1e-3, 0.25


class _Probe(TrainerCallback):
    """Records the trainer's state at each train begin and end."""

    def __init__(self, trainer):
        self.trainer, self.begins, self.ends = trainer, [], []

    def _snapshot(self, state, model, optimizer, lr_scheduler):
        trainer = self.trainer
        return {
            "trainer": trainer, "model": model, "optimizer": optimizer,
            "global_step": state.global_step,
            "weights": {n: p.detach().clone() for n, p in model.named_parameters()},
            "optimizer_state": {k: {n: t.clone() for n, t in v.items()}
                                for k, v in optimizer.state_dict()["state"].items()},
            "lrs": [group["lr"] for group in optimizer.param_groups],
            "scheduler_lrs": list(lr_scheduler.get_last_lr()),
            "generation": (getattr(trainer, "_last_loaded_step", None), trainer._step, trainer._buffered_inputs),
            "engine": getattr(getattr(trainer, "vllm_generation", None), "llm", None),
        }

    def on_train_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        self.begins.append(self._snapshot(state, model, optimizer, lr_scheduler))

    def on_train_end(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kwargs):
        self.ends.append(self._snapshot(state, model, optimizer, lr_scheduler))


def _spread_reward(prompts=None, completions=None, completion_ids=None, **kwargs) -> list[float]:
    """A reward with spread within each group (the random tiny model earns -1 on every ARC episode, which gives no
    gradient and so no optimizer moments to compare): a function of the sampled tokens."""
    return [float(sum(ids) % 7) for ids in completion_ids]


@pytest.fixture
def built(monkeypatch):
    """Every ArcGRPOTrainer built by `main`, each with a probe and a reward with spread."""
    trainers = []

    class Counted(arc_trl.trainer.ArcGRPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, reward_funcs=[_spread_reward], **kwargs)
            self.probe = _Probe(self)
            self.add_callback(self.probe)
            trainers.append(self)
            self.syncs = []  # (attempt, global step) of each weight sync to vLLM
            self.generations = []  # (attempt, global step) of each generation batch
            if self.use_vllm:
                sync = self.vllm_generation.sync_weights

                def recorded_sync():
                    self.syncs.append((len(self.probe.begins) - 1, self.state.global_step))
                    return sync()

                self.vllm_generation.sync_weights = recorded_sync

        def _generate_and_score_completions(self, inputs):
            self.generations.append((len(self.probe.begins) - 1, self.state.global_step))
            return super()._generate_and_score_completions(inputs)

    monkeypatch.setattr(arc_trl.trainer, "ArcGRPOTrainer", Counted)
    return trainers


def _collapse_at(monkeypatch, step: int) -> None:
    """The detector labels `step` collapse, once (the first attempt)."""
    real = CollapseDetector.update
    done = []

    def update(self, at, metrics):
        verdict = real(self, at, metrics)
        if at == step and not done:
            done.append(at)
            firing = Firing("scripted", COLLAPSE, 1.0, 0.0, 0.0, "scripted collapse")
            return Verdict(at, COLLAPSE, [firing], verdict.values, verdict.baseline_ready, verdict.raw)
        return verdict

    monkeypatch.setattr(CollapseDetector, "update", update)


def _run(tiny_model_dir, out, *extra):
    return main([
        "--config", CONFIG, "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(out),
        "--use_vllm", "false", "--max_tasks", "4", "--num_generations", "2", "--per_device_train_batch_size", "4",
        "--max_tokens_per_turn", "24", "--max_completion_length", "48", "--report_to", "none", "--dump_rollouts", "0",
        "--learning_rate", str(BASE_LR), "--lr_scheduler_type", "constant", "--max_steps", "4",
        "--collapse_guard", "rollback", "--collapse_lr_scale", str(SCALE), "--collapse_max_rollbacks", "1",
        *extra,
    ])


def _checkpoint_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(checkpoint / "model.safetensors"))


def _assert_restored(begin, checkpoint: Path, collapsed_weights) -> None:
    saved = _checkpoint_weights(checkpoint)
    assert saved
    assert set(saved) <= set(begin["weights"])
    for name, tensor in saved.items():  # the trainer's weights are the checkpoint's ...
        assert torch.equal(begin["weights"][name], tensor), name
    assert any(not torch.equal(collapsed_weights[n], t) for n, t in saved.items())  # ... not the collapsed ones
    optimizer = torch.load(checkpoint / "optimizer.pt", weights_only=True)
    assert begin["optimizer_state"].keys() == optimizer["state"].keys()
    assert all(begin["optimizer_state"][i]["exp_avg"].abs().sum() > 0 for i in optimizer["state"])  # real moments
    for index, entries in optimizer["state"].items():  # the optimizer state is the checkpoint's (Adam moments, step)
        assert begin["optimizer_state"][index].keys() == entries.keys()
        for name, tensor in entries.items():
            assert torch.equal(begin["optimizer_state"][index][name], tensor), (index, name)


def test_rollback_loads_the_last_ok_checkpoint_into_the_same_trainer(tiny_model_dir, tmp_path, monkeypatch, built):
    _collapse_at(monkeypatch, 3)
    out = tmp_path / "run"
    summary = _run(tiny_model_dir, out, "--save_steps", "1", "--save_total_limit", "10")
    assert summary["global_step"] == 4 and summary["collapse_rollbacks"] == 1
    assert len(built) == 1, f"{len(built)} trainers built: the rollback must reuse the first one"
    probe = built[0].probe
    first, after = probe.begins[0], probe.begins[1]
    # the same trainer, model and optimizer objects
    assert after["trainer"] is first["trainer"] and after["model"] is first["model"]
    assert after["optimizer"] is first["optimizer"]
    # checkpoint-2 holds the update whose episodes collapsed at step 3 (rejected): back to checkpoint-1
    events = [json.loads(line) for line in (out / "collapse_guard.jsonl").read_text().splitlines()]
    rollback = next(e for e in events if e["event"] == "rollback")
    assert rollback["from_step"] == 3 and rollback["resume_from"] == str(out / "checkpoint-1")
    assert after["global_step"] == 1
    _assert_restored(after, out / "checkpoint-1", probe.ends[0]["weights"])
    # learning rate: base x collapse_lr_scale in the optimizer, the scheduler and the steps logged after the rollback
    assert first["lrs"] == [pytest.approx(BASE_LR)] * len(first["lrs"])
    assert after["lrs"] == [pytest.approx(BASE_LR * SCALE)] * len(after["lrs"])
    assert after["scheduler_lrs"] == [pytest.approx(BASE_LR * SCALE)] * len(after["scheduler_lrs"])
    state = json.loads((out / "trainer_state.json").read_text())
    lrs = {h["step"]: h["learning_rate"] for h in state["log_history"] if "reward" in h}
    assert lrs[1] == pytest.approx(BASE_LR) and lrs[2] == lrs[3] == lrs[4] == pytest.approx(BASE_LR * SCALE)
    # TRL's generation state is that of a new trainer: the next step generates (and syncs vLLM when there is one)
    assert after["generation"][1:] == (0, None)


def test_a_collapse_before_the_first_save_rolls_back_to_the_initial_weights(tiny_model_dir, tmp_path, monkeypatch,
                                                                             built):
    """Issue 24's case: a collapse at step 2, long before the first save: `checkpoint-0` (saved at train begin in
    rollback mode) is the target, with a fresh optimizer and the scaled learning rate."""
    _collapse_at(monkeypatch, 2)
    out = tmp_path / "run"
    summary = _run(tiny_model_dir, out, "--save_steps", "100")
    assert summary["global_step"] == 4 and summary["collapse_rollbacks"] == 1 and len(built) == 1
    probe = built[0].probe
    first, after = probe.begins[0], probe.begins[1]
    assert after["trainer"] is first["trainer"] and after["optimizer"] is first["optimizer"]
    assert after["global_step"] == 0
    for name, tensor in first["weights"].items():  # the initial weights (also what checkpoint-0 holds)
        assert torch.equal(after["weights"][name], tensor), name
    _assert_restored(after, out / "checkpoint-0", probe.ends[0]["weights"])
    assert after["optimizer_state"] == {}  # checkpoint-0's optimizer has taken no step
    assert after["lrs"] == [pytest.approx(BASE_LR * SCALE)] * len(after["lrs"])
    assert after["scheduler_lrs"] == [pytest.approx(BASE_LR * SCALE)] * len(after["scheduler_lrs"])
    events = [json.loads(line) for line in (out / "collapse_guard.jsonl").read_text().splitlines()]
    assert next(e for e in events if e["event"] == "rollback")["resume_from"] == str(out / "checkpoint-0")


def test_after_a_rollback_the_first_step_samples_afresh_not_from_the_buffered_batch(tiny_model_dir, tmp_path,
                                                                                   monkeypatch, built):
    """steps_per_generation 2: TRL samples one batch for two optimizer steps and buffers it. The collapse at step 3
    leaves half of a batch sampled from the collapsed weights in the buffer; the first step after the rollback must
    sample a new batch from the restored weights, as a new trainer would."""
    _collapse_at(monkeypatch, 3)
    out = tmp_path / "run"
    summary = _run(tiny_model_dir, out, "--steps_per_generation", "2", "--save_steps", "1", "--save_total_limit", "10")
    assert summary["global_step"] == 4 and summary["collapse_rollbacks"] == 1 and len(built) == 1
    trainer = built[0]
    # checkpoint-1 is judged 2 steps on (one generation later): rejected by step 3, so back to checkpoint-0
    assert trainer.probe.begins[1]["global_step"] == 0
    assert trainer.generations == [(0, 0), (0, 2), (1, 0), (1, 2)], trainer.generations


@pytest.mark.vllm
def test_rollback_keeps_the_colocated_vllm_engine_and_syncs_it_the_checkpoint_weights(tiny_model_dir, tmp_path,
                                                                                    monkeypatch, built):
    """With colocated vLLM (CPU build): the engine built with the trainer is the one generating after the rollback,
    and the first generation after it syncs the restored weights (the sampler's log-probs then match the trainer's)."""
    _collapse_at(monkeypatch, 3)
    out = tmp_path / "run"
    summary = _run(tiny_model_dir, out, "--use_vllm", "true", "--vllm_mode", "colocate", "--save_steps", "1",
                   "--save_total_limit", "10", "--vllm_max_model_length", "1536")
    assert summary["global_step"] == 4 and summary["collapse_rollbacks"] == 1 and len(built) == 1
    trainer = built[0]
    first, after = trainer.probe.begins
    assert first["engine"] is not None and after["engine"] is first["engine"]  # no second engine
    assert after["global_step"] == 1 and after["generation"] == (-1, 0, None)  # a sync is due at the next generation
    _assert_restored(after, out / "checkpoint-1", trainer.probe.ends[0]["weights"])
    # attempt 0 synced before steps 1-3 (global steps 0-2); attempt 1 syncs checkpoint-1's weights first
    assert trainer.syncs == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (1, 3)], trainer.syncs
    state = json.loads((out / "trainer_state.json").read_text())
    after_rollback = [h for h in state["log_history"] if "reward" in h and h["step"] >= 2]
    assert [h["step"] for h in after_rollback] == [2, 3, 4]
    # The engine generates with the trainer's weights. Sampler and trainer log-probs differ by kernel rounding
    # (vLLM-CPU's attention and matmuls vs torch's, float32), a floor that depends on the CPU (~1e-3 nats on one
    # 2-core AMD machine, a little less on another): the reference is this run's own step 1, sampled right after the
    # engine's first sync. An engine left unsynced after the rollback (holding the weights of two more updates at
    # lr 1e-3) misses by 100-250x that floor (measured by skipping the sync), a synced one by ~1x: a factor 10 sits
    # an order of magnitude from both, whatever the CPU's rounding.
    floor = [h for h in state["log_history"] if "reward" in h][0]["sampling/sampling_logp_difference/mean"]
    assert 0 < floor < 1e-2, floor  # float32 rounding, not a sync bug, already at step 1
    for h in after_rollback:
        assert h["sampling/sampling_logp_difference/mean"] < 10 * floor, (h, floor)


def test_stop_from_a_trainer_built_in_python_raises_collapse_stopped_with_its_report(tiny_model_dir, tmp_path,
                                                                                      monkeypatch):
    """No train_entry (issue 44): `collapse_guard: stop` on a trainer built in Python ends `trainer.train()` at the
    collapse, keeps the collapsed weights aside (never as checkpoint-N) and raises CollapseStopped (exit status 3)
    after writing the report, as `arc-trl train` does."""
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from arc_trl import ArcConfig, build_dataset, load_tasks, resolve_chat_template
    from arc_trl.collapse.rollback import COLLAPSE_EXIT_CODE, CollapseStopped
    from arc_trl.trainer.arc_grpo_trainer import ArcGRPOTrainer

    _collapse_at(monkeypatch, 2)
    out = tmp_path / "run"
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir), padding_side="left")
    resolve_chat_template(tokenizer)
    dataset = build_dataset(load_tasks("arc-agi-1/train", ids=["6150a2bd", "67a3c6ac"]), "repl", tokenizer=tokenizer)
    arc = ArcConfig(max_turns=2, max_tokens_per_turn=24, sandbox_workers=1, collapse_guard="stop")
    args = GRPOConfig(output_dir=str(out), num_generations=2, per_device_train_batch_size=4, max_completion_length=48,
                      max_steps=4, logging_steps=1, save_steps=1, use_vllm=False, use_cpu=True, bf16=False,
                      report_to=[], seed=0)
    trainer = ArcGRPOTrainer(str(tiny_model_dir), args, arc, train_dataset=dataset, processing_class=tokenizer)
    try:
        with pytest.raises(CollapseStopped) as stopped:
            trainer.train()
    finally:
        trainer.close()
    assert stopped.value.code == COLLAPSE_EXIT_CODE and trainer.state.global_step == 2
    report = json.loads((out / "collapse_guard_stop.json").read_text())
    assert report["step"] == 2 and report["action"] == "stop" and "scripted collapse" in report["reason"]
    assert (out / "collapse_guard" / "collapsed-step-2" / "model.safetensors").exists()
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]  # the collapsed step is not one
