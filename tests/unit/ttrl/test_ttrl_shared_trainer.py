"""One trainer for a whole test-time run (arc_trl/ttrl/shared_trainer.py), with the tiny model on CPU and a reward
that alternates within each group (so every step has a gradient and the LoRA weights move): built once for three
tasks; each task starts from the start model (its logits), a new optimizer, step 0 and its own folder (LoRA, and full
fine-tuning: every weight restored); a task gives the same adapter and attempts after another task as alone."""

from __future__ import annotations

import json

import torch
from peft import LoraConfig
from transformers import TrainerCallback
from ttrl_helpers import INPUTS, OUTPUTS, FakeClock, run_context

from arc_trl.data.task import ArcTask, Pair
from arc_trl.ttrl.adapt import AdaptingRunner
from arc_trl.ttrl.budget import Budget
from arc_trl.ttrl.loop import run_tasks
from arc_trl.ttrl.task_folder import TaskFolder

PROBE_IDS = torch.tensor([[1, 5, 9, 14, 3, 7, 2, 11]])


def alternating_reward(completions, **kwargs) -> list[float]:
    """0, 1, 0, 1, ...: every group of two episodes has one of each, so every advantage is +-1."""
    return [float(i % 2) for i in range(len(completions))]


def make_task(k: int) -> ArcTask:
    """Three training pairs (rotated by k, so each task's leave-one-out prompts differ), one hidden test input."""
    pairs = [Pair(i, o) for i, o in zip(INPUTS, OUTPUTS)]
    return ArcTask(f"task{k}", pairs[k:] + pairs[:k], [[[3, 3, 3], [0, 0, 0], [3, 3, 3]]], None, "test")


def logits(model, ids: torch.Tensor = PROBE_IDS) -> torch.Tensor:
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(input_ids=ids).logits.detach().clone()
    model.train(was_training)
    return out


class Probe(TrainerCallback):
    """What the trainer looks like as each task's training begins and ends."""

    def __init__(self) -> None:
        self.begins: list[dict] = []
        self.end_logits: list[torch.Tensor] = []

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        self.begins.append({"logits": logits(model), "optimizer": optimizer, "moments": len(optimizer.state),
                            "step": state.global_step, "output_dir": args.output_dir})

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.end_logits.append(logits(model))


def runner_for(tiny_model_dir, probe: Probe | None = None, args: dict | None = None, lora: bool = True,
               **ttrl) -> AdaptingRunner:
    from trl import ModelConfig

    from arc_trl.train_entry import load_tokenizer

    tokenizer = load_tokenizer(ModelConfig(model_name_or_path=str(tiny_model_dir)))[0]
    kwargs = {"reward_funcs": [alternating_reward], "callbacks": [probe] if probe else []}
    context = run_context(tokenizer, str(tiny_model_dir), args={"max_steps": 2, "learning_rate": 0.05, **(args or {})},
                          ttrl=ttrl, clock=FakeClock(), trainer_kwargs=kwargs)
    if lora:
        context.peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                         task_type="CAUSAL_LM")
    return AdaptingRunner(context)


def start_logits(tiny_model_dir) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    return logits(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32))


def run(runner: AdaptingRunner, tasks: list[ArcTask], out) -> dict[str, dict]:
    with runner:
        run_tasks(tasks, out, runner, Budget(None, None, 0.0, FakeClock()), log=lambda line: None)
    return {task.id: TaskFolder(out, task.id).record() for task in tasks}


def test_one_trainer_serves_three_tasks_each_from_the_start_model(tiny_model_dir, tmp_path, trainer_builds):
    builds = trainer_builds
    probe = Probe()
    records = run(runner_for(tiny_model_dir, probe), [make_task(k) for k in range(3)], tmp_path)
    assert len(builds) == 1, "a trainer (a model load, an engine) per task"
    assert [r["steps"] for r in records.values()] == [2, 2, 2] and all(r["adapted"] for r in records.values())
    start = start_logits(tiny_model_dir)
    assert (probe.end_logits[0] - start).abs().max() > 1e-3, "task 1 did not move the weights: the check is vacuous"
    for k, begin in enumerate(probe.begins):
        torch.testing.assert_close(begin["logits"], start, atol=1e-6, rtol=0, msg=f"task {k + 1} did not start "
                                   "from the start model")
        assert begin["step"] == 0 and begin["moments"] == 0, f"task {k + 1}: a step or optimizer state carried over"
        assert begin["output_dir"] == str(TaskFolder(tmp_path, f"task{k}").train_dir)
        assert all(begin["optimizer"] is not other["optimizer"] for other in probe.begins[:k])


def test_full_fine_tuning_restores_every_start_weight(tiny_model_dir, tmp_path):
    probe = Probe()
    run(runner_for(tiny_model_dir, probe, args={"max_steps": 1}, lora=False), [make_task(0), make_task(1)], tmp_path)
    start = start_logits(tiny_model_dir)
    assert (probe.end_logits[0] - start).abs().max() > 1e-3, "task 1 did not move the weights: the check is vacuous"
    torch.testing.assert_close(probe.begins[1]["logits"], start, atol=1e-6, rtol=0)
    assert probe.begins[1]["moments"] == 0


def _attempts(folder: TaskFolder) -> list[str]:
    return [json.loads(line)["completion"] for line in folder.completions.read_text().splitlines()]


def _adapter(folder: TaskFolder) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder.adapter_dir / "adapter_model.safetensors"))


def test_a_task_gives_the_same_result_after_another_task_as_alone(tiny_model_dir, tmp_path):
    # one step of a generation batch of two: task 1 leaves TRL's second micro-batch buffered (it must not be trained)
    args = {"max_steps": 1, "steps_per_generation": 2}
    first, second = make_task(0), make_task(1)
    after = run(runner_for(tiny_model_dir, args=args, keep_adapters=True), [first, second], tmp_path / "after")
    alone = run(runner_for(tiny_model_dir, args=args, keep_adapters=True), [second], tmp_path / "alone")
    assert after[second.id]["reward_first"] == alone[second.id]["reward_first"]
    folders = TaskFolder(tmp_path / "after", second.id), TaskFolder(tmp_path / "alone", second.id)
    trained, by_itself = (_adapter(f) for f in folders)
    assert trained.keys() == by_itself.keys() and trained
    for name, value in trained.items():
        torch.testing.assert_close(value, by_itself[name], atol=1e-6, rtol=0, msg=name)
    assert _attempts(folders[0]) == _attempts(folders[1])
    first_adapter = _adapter(TaskFolder(tmp_path / "after", first.id))
    assert any((first_adapter[n] - v).abs().max() > 1e-4 for n, v in trained.items()), "the tasks trained alike"
