"""One task's adaptation with the real trainer (the tiny model, CPU, transformers generation): the teacher's requests
never hold the held-out output, the task's time budget stops training (an injected clock), the attempts are written;
a single-pair task is attempted unadapted."""

from __future__ import annotations

from concurrent.futures import Future

from ttrl_helpers import OUTPUTS, FakeClock, grid_texts, run_context

from arc_trl.train_entry import load_tokenizer
from arc_trl.ttrl.adapt import AdaptingRunner
from arc_trl.ttrl.task_folder import TaskFolder


class RecordingTeacher:
    """A teacher that records every sequence it is asked to score (and scores every token 0)."""

    def __init__(self) -> None:
        self.sequences: list[list[int]] = []

    def score(self, sequences, prompt_lengths):
        self.sequences += [list(s) for s in sequences]
        return [[0.0] * (len(s) - n) for s, n in zip(sequences, prompt_lengths)]

    def submit(self, sequences, prompt_lengths):
        future = Future()
        future.set_result(self.score(sequences, prompt_lengths))
        return future


def _tokenizer(model_dir):
    from trl import ModelConfig

    return load_tokenizer(ModelConfig(model_name_or_path=str(model_dir)))[0]


def test_adapting_keeps_the_output_from_the_teacher_stops_at_the_time_budget_and_writes_attempts(
        leak_task, tiny_model_dir, tmp_path):
    teacher, clock = RecordingTeacher(), FakeClock(step=10.0)  # every reading of the clock: 10 s later
    tokenizer = _tokenizer(tiny_model_dir)
    context = run_context(tokenizer, str(tiny_model_dir), args={"max_steps": 3},
                          arc={"teacher_backend": "local", "teacher_model": str(tiny_model_dir), "teacher_tau": 0.1},
                          clock=clock, trainer_kwargs={"teacher": teacher})
    from peft import LoraConfig

    context.peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    folder = TaskFolder(tmp_path, leak_task.id)
    folder.reset()
    with AdaptingRunner(context) as runner:
        record = runner(leak_task, folder, train_seconds=5.0)
    assert record["adapted"] and record["loo_prompts"] == 3
    assert record["steps"] == 1 and record["stopped_by"] == "task time budget"  # max_steps 3, the budget first
    assert teacher.sequences, "the teacher was never asked: the check below would be vacuous"
    for text in map(tokenizer.decode, teacher.sequences):  # a leave-one-out prompt shows the other two outputs only
        assert sum(grid_texts(OUTPUTS[k])[0] in text for k in range(3)) == 2, "the held-out output reached the teacher"
    lines = folder.completions.read_text().splitlines()
    assert len(lines) == record["n_attempts"] == 2
    assert not folder.adapter_dir.exists()  # keep_adapters off


def test_a_single_pair_task_is_attempted_unadapted(toy_task_two_tests, tiny_model_dir, tmp_path):
    context = run_context(_tokenizer(tiny_model_dir), str(tiny_model_dir))
    task = toy_task_two_tests.without_solutions()
    folder = TaskFolder(tmp_path, task.id)
    folder.reset()
    with AdaptingRunner(context) as runner:
        record = runner(task, folder, train_seconds=None)
    assert not record["adapted"] and record["reason"].startswith("a single training pair")
    assert record["n_attempts"] == 2 and len(folder.completions.read_text().splitlines()) == 2
    assert not folder.train_dir.joinpath("trainer_state.json").exists()


def test_the_baseline_attempts_a_leave_one_out_task_without_training(leak_task, tiny_model_dir, tmp_path):
    """adapt: false: the same attempts and vote from the start model, no GRPO step, on a task that could be left one
    out (the per-task comparison of a test-time run against its baseline)."""
    context = run_context(_tokenizer(tiny_model_dir), str(tiny_model_dir), ttrl={"adapt": False})
    folder = TaskFolder(tmp_path, leak_task.id)
    folder.reset()
    with AdaptingRunner(context) as runner:
        record = runner(leak_task, folder, train_seconds=None)
    assert not record["adapted"] and record["reason"].startswith("adapt: false")
    assert record["n_attempts"] == 2 and not folder.train_dir.joinpath("trainer_state.json").exists()
