"""The README's Python quick start runs as written, on the tiny local model instead of the hub id, on CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python quick start", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_readme_python_quick_start_trains_two_steps(tiny_model_dir, tmp_path):
    code = _quickstart()
    assert len(code.strip().splitlines()) <= 20
    # the two edits a CPU test needs, each applied exactly once: the local model, and no bf16 (TRL's default) on CPU
    for old, new in (('"Qwen/Qwen3-0.6B"', repr(str(tiny_model_dir))),
                     ("report_to=[])", "report_to=[], use_cpu=True, bf16=False)")):
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    (tmp_path / "quickstart.py").write_text(code)
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    state = json.loads((tmp_path / "runs/quickstart/checkpoint-2/trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "reward" in h]
    assert state["global_step"] == 2 and [h["step"] for h in steps] == [1, 2]
    # the episodes ran through the REPL rollout: its metrics are logged, each turn capped at 64 tokens
    assert all(1 <= h["episode/turns"] <= 2 and 0 < h["episode/model_tokens"] <= 2 * 64 for h in steps), steps
