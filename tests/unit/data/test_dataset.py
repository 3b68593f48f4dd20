import json

import pytest

from arc_trl import load_tasks
from arc_trl.data import (
    ArcTask,
    Augmentation,
    build_dataset,
    prompt_length_report,
    render_messages,
    split_task_id,
)
from arc_trl.data.dataset import count_prompt_tokens, expand_tasks, task_from_json_string


def test_columns_and_contents(toy_task, toy_task_two_tests):
    ds = build_dataset([toy_task, toy_task_two_tests], "repl")
    assert ds.column_names == ["prompt", "task_id", "task_json", "augmentation"]
    assert ds["task_id"] == ["toy_mirror", "toy_identity"]
    assert ds["augmentation"] == ["", ""]
    assert ds[0]["prompt"] == render_messages(toy_task, "repl")
    restored = ArcTask.from_json("toy_identity", json.loads(ds[1]["task_json"]))
    assert restored.test_outputs == toy_task_two_tests.test_outputs  # solutions are kept for the rewards
    assert restored.train == toy_task_two_tests.train


def test_augmented_rows(toy_task):
    ds = build_dataset([toy_task], "program", augment=True, copies=3, seed=1)
    assert len(ds) == 3
    augs = [Augmentation.from_string(s) for s in ds["augmentation"]]
    assert len(set(augs)) == 3 and not any(a.is_identity for a in augs)  # identity is possible, not drawn here
    for row, aug in zip(ds, augs):
        assert row["task_id"] == f"toy_mirror|{aug.to_string()}"
        stored = json.loads(row["task_json"])
        assert stored["metadata"] == {"original_id": "toy_mirror", "augmentation": aug.to_string()}
        assert {k: stored[k] for k in ("train", "test")} == aug.apply_task(toy_task).to_json()
        assert aug.invert([stored["test"][0]["output"]]) == toy_task.test_outputs
        assert row["prompt"] == render_messages(aug.apply_task(toy_task), "program")
    again = build_dataset([toy_task], "program", augment=True, copies=3, seed=1)
    assert again["task_id"] == ds["task_id"]
    assert build_dataset([toy_task], "program", augment=True, copies=3, seed=2)["task_id"] != ds["task_id"]


def test_expand_tasks_options(toy_task):
    tasks = expand_tasks([toy_task], augment={"colors": False}, copies=20)
    assert len(tasks) == 8 and len({t.id for t in tasks}) == 8  # only 8 distinct geometric transforms exist
    assert all(Augmentation.from_string(t.metadata.get("augmentation", "")).colors == tuple(range(10)) for t in tasks)
    background = expand_tasks([toy_task], augment={"permute_background": True}, copies=30, seed=0)
    assert any(split_task_id(t.id)[1].colors[0] != 0 for t in background)
    with pytest.raises(ValueError, match="needs augment=True"):
        expand_tasks([toy_task], copies=2)


def test_task_json_keeps_metadata(toy_task):
    toy_task.metadata["reference_program"] = "def transform(grid):\n    return grid[:, ::-1]"
    ds = build_dataset([toy_task], "program")
    restored = task_from_json_string(ds[0]["task_json"], ds[0]["task_id"])
    assert restored.metadata == toy_task.metadata and restored.test_outputs == toy_task.test_outputs
    assert render_messages(restored, "program", privileged="program") == render_messages(
        toy_task, "program", privileged="program"
    )


def test_teacher_prompt_column(toy_task):
    assert "teacher_prompt" not in build_dataset([toy_task], "repl", privileged="none").column_names
    ds = build_dataset([toy_task], "repl", privileged="solutions")
    assert ds.column_names[-1] == "teacher_prompt"
    assert ds[0]["teacher_prompt"] == render_messages(toy_task, "repl", privileged="solutions")
    assert ds[0]["teacher_prompt"][1]["content"].startswith(ds[0]["prompt"][1]["content"])


def test_token_length_filter_and_report(tiny_tokenizer):
    tasks = load_tasks("arc-agi-1/train", ids=["007bbfb7", "00d62c1b", "017c7c7b", "025d127b"])
    prompts = [render_messages(t, "repl") for t in tasks]
    lengths = count_prompt_tokens(prompts, tiny_tokenizer)
    # independent count: the chat template tokenized in one go, with the generation prompt
    for p, n in zip(prompts, lengths):
        assert n == len(tiny_tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True)["input_ids"])
    ordered = sorted(lengths)
    limit = ordered[1]  # keeps the two shortest (lengths are distinct here)
    assert len(set(lengths)) == 4
    ds, report = build_dataset(tasks, "repl", tokenizer=tiny_tokenizer, max_prompt_tokens=limit, return_report=True)
    assert (report.num_kept, report.num_dropped) == (2, 2)
    assert report.longest_tokens == ordered[-1] and report.longest_kept_tokens == limit
    assert report.longest_task_id == tasks[lengths.index(ordered[-1])].id
    kept = {t.id for t, n in zip(tasks, lengths) if n <= limit}
    assert set(ds["task_id"]) == kept and sorted(report.dropped_task_ids) == sorted({t.id for t in tasks} - kept)
    assert "kept 2, dropped 2" in str(report)
    assert prompt_length_report(prompts, tiny_tokenizer).num_dropped == 0


def test_length_filter_errors(toy_task, tiny_tokenizer):
    with pytest.raises(ValueError, match="needs a tokenizer"):
        build_dataset([toy_task], "repl", max_prompt_tokens=100)
    with pytest.raises(ValueError, match="all 1 prompts are longer than max_prompt_tokens=10"):
        build_dataset([toy_task], "repl", tokenizer=tiny_tokenizer, max_prompt_tokens=10)
    with pytest.raises(ValueError, match="no tasks"):
        build_dataset([], "repl")
