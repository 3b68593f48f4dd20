"""`evaluate generate --check-transform`: the episodes the check submitted are scored as solved. The folder's scoring
replayed them as plain REPL attempts (SUBMIT only) and found no prediction: every coder-harness arm scored 0."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROTATE = "The grid turns half a turn.\n```python\nimport numpy as np\ndef transform(grid):\n    return np.rot90(grid, 2)\n```"


class OneReply:
    """A policy that answers every turn with the same text (then end of turn)."""

    def __init__(self, tokenizer, text: str) -> None:
        self.ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        self.eos_token_ids = [tokenizer.eos_token_id]

    def generate(self, sequences, max_tokens, keys=None):
        out = [self.ids[: max_tokens - 1] + self.eos_token_ids for _ in sequences]
        return out, [[-0.5] * len(ids) for ids in out]

    def global_any(self, flag):
        return flag


def test_episodes_the_check_submitted_are_scored_as_solved(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from arc_trl.eval.generate import add_generate_arguments, run_generate

    import argparse

    out = tmp_path / "eval"
    args = add_generate_arguments(argparse.ArgumentParser()).parse_args([
        "--model", str(tiny_model_dir), "--dataset", "arc-agi-1/train", "--task-ids", "6150a2bd",
        "--n-predictions", "2", "--output-dir", str(out), "--prompt-template",
        str(ROOT / "configs" / "prompts" / "coder-repl.yaml"), "--check-transform", "--max-turns", "2",
        "--max-completion-length", "512", "--workers", "1", "--no-progress"])
    assert run_generate(args, generator=OneReply(AutoTokenizer.from_pretrained(tiny_model_dir), ROTATE)) == 0
    records = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert [r["finish_reason"] for r in records] == ["submitted", "submitted"]  # the check submitted them
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["pass_rate"] == 1.0 and metrics["is_correct"] == 1.0 and metrics["train_pass_rate"] == 1.0
    rows = [json.loads(line) for line in (out / "per_attempt.jsonl").read_text().splitlines()]
    assert all(r["passed"] and r["source"] == "transform" for r in rows)


def test_a_shared_engine_that_samples_otherwise_than_the_folder_asks_is_refused(tiny_model_dir, tmp_path, capsys):
    """One engine serves several folders (lab/arc_experiments/coder): a folder asking for another temperature than the
    engine samples with would record settings its attempts were not made with."""
    import argparse

    from transformers import AutoTokenizer

    from arc_trl.eval.generate import add_generate_arguments, run_generate

    engine = OneReply(AutoTokenizer.from_pretrained(tiny_model_dir), ROTATE)
    engine.sampling = {"temperature": 1.0, "top_p": 1.0, "repetition_penalty": 1.0, "stop_token_ids": [0]}
    args = add_generate_arguments(argparse.ArgumentParser()).parse_args([
        "--model", str(tiny_model_dir), "--dataset", "arc-agi-1/train", "--task-ids", "6150a2bd", "--n-predictions",
        "1", "--output-dir", str(tmp_path / "eval"), "--temperature", "0.5", "--workers", "1", "--no-progress"])
    assert run_generate(args, generator=engine) == 2
    assert "the shared engine samples with" in capsys.readouterr().err
    assert not (tmp_path / "eval" / "completions.jsonl").exists()


def test_a_folder_generated_without_scores_is_scored_by_another_process_as_generate_would(tiny_model_dir, tmp_path,
                                                                                          capsys):
    """lab/arc_experiments/coder scores a folder in a process of its own (`score-folder`) while the engine goes on: the
    scores are those `generate` writes itself, and a folder with attempts missing is refused (no engine there)."""
    import argparse

    from transformers import AutoTokenizer

    from arc_experiments.coder.scoring import score_folder_command
    from arc_trl.eval.generate import add_generate_arguments, run_generate

    engine = OneReply(AutoTokenizer.from_pretrained(tiny_model_dir), ROTATE)

    def argv(out, n):
        return ["--model", str(tiny_model_dir), "--dataset", "arc-agi-1/train", "--task-ids", "6150a2bd", "007bbfb7",
                "--n-predictions", str(n), "--output-dir", str(out), "--prompt-template",
                str(ROOT / "configs" / "prompts" / "coder-repl.yaml"), "--check-transform", "--max-turns", "2",
                "--max-completion-length", "512", "--workers", "1", "--no-progress"]

    parse = add_generate_arguments(argparse.ArgumentParser()).parse_args
    assert run_generate(parse(argv(tmp_path / "inline", 2)), generator=engine) == 0
    assert run_generate(parse([*argv(tmp_path / "later", 2), "--no-score"]), generator=engine) == 0
    assert not (tmp_path / "later" / "metrics.json").exists()
    assert score_folder_command([*argv(tmp_path / "later", 3), "--no-score"]) == 3  # a third attempt is missing
    assert "2 attempt(s) of" in capsys.readouterr().err and not (tmp_path / "later" / "metrics.json").exists()
    assert score_folder_command([*argv(tmp_path / "later", 2), "--no-score"]) == 0
    inline, later = (json.loads((tmp_path / f / "metrics.json").read_text()) for f in ("inline", "later"))
    drop = {"completions", "seconds"}
    assert {k: v for k, v in later.items() if k not in drop} == {k: v for k, v in inline.items() if k not in drop}
    assert later["n_attempts"] == 4 and later["pass_rate"] == 0.5  # 6150a2bd turns half a turn, 007bbfb7 does not
