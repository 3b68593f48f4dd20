"""`arc-trl sft --transcripts`: a model's own transcripts (arc-trl transcripts) trained beside synthetic reference
episodes, in the coder prompt's one-turn convention (`check_transform`), within a wall-clock budget (`max_train_seconds`)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sft_trains_on_transcripts_beside_one_turn_reference_episodes(tiny_model_dir, tmp_path, capsys):
    from arc_trl.cli.sft import main as sft

    row = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                        {"role": "assistant", "content": "```python\ndef transform(grid):\n    return grid[::-1]\n```"}],
           "task_id": "t", "kind": "hindsight"}
    transcripts = tmp_path / "t.jsonl"
    transcripts.write_text(json.dumps(row) + "\n")
    trainer = sft(["--config", str(ROOT / "configs" / "demo" / "sft-student.yaml"),
                   "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "sft"),
                   "--max_steps", "3", "--max_train_seconds", "1e-6", "--report_to", "none", "--dataset", "synthetic:n=3,seed=0,difficulty=tiny",
                   "--prompt_template", str(ROOT / "configs" / "prompts" / "coder-repl.yaml"),
                   "--check_transform", "true", "--transcripts", str(transcripts)])
    out = capsys.readouterr().out
    assert trainer.state.global_step == 1 and "stopped at the time budget (1e-06 s) after step 1 of 3" in out
    assert "[sft] 3 reference episodes (0 dropped)" in out and "[sft] 1 transcripts (1 hindsight)" in out
    rows = trainer.train_dataset
    assert len(rows) == 4
    texts = [trainer.processing_class.decode(ids) for ids in rows["input_ids"]]
    assert sum("Write `transform(grid)` in a ```python block." in t for t in texts) == 3  # the coder prompt
    assert all(t.count("<|im_start|>assistant") == 1 for t in texts)  # one turn each: the check submits
    assert any("return grid[::-1]" in t for t in texts)
