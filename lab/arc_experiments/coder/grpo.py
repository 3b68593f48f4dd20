"""GRPO and strong-to-weak OPD on the ARC-AGI-1 training tasks (issue 60): the warm-started 0.5B as the student, the
warm-started 1.5B (its LoRA merged) as the in-process teacher, `configs/coder/grpo-qwen05.yaml`.

Arms: `grpo` (GRPO alone), `grpo-opd` (adv_tau 1 + teacher_tau), `opd` (adv_tau 0: the teacher term alone). Each
trains on the 300 training tasks outside the 100 validation tasks (`validation_ids`), which choose the checkpoints
afterwards; no evaluation task is trained or chosen on. A run's folder holds its LoRA checkpoints, trainer_state.json
(the step-1 teacher_kl of an OPD arm is the student-teacher gap the issue measures first), run_summary.json and
collapse_guard.jsonl; `pack` brings back all but the checkpoints.

    GRPO_STEPS=10 ONLY=import-qwen05,import-qwen15,zero-shot-train-qwen05,grpo-qwen05-grpo-opd-s0 \
      bash lab/gpu_box/coder.sh stash .gpu/NNN start     # a stage per arm and seed; the warm starts made on the way
    bash lab/gpu_box/coder.sh deadline 1600             # every run ends 1600 s after the first call (WORK/deadline)
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arc_experiments.coder.plan import ROOT, TRAIN, Arm, validation_ids
from arc_experiments.coder.scoring import say

Stage = tuple[str, Callable[[], bool], Callable[[], int]]

CONFIG = "configs/coder/grpo-qwen05.yaml"
TEACHER_TAU = 0.1  # the SmolLM2 experiments' choice; issue 60 chooses it again on the validation tasks
ARMS: dict[str, list[str]] = {
    "grpo": [],
    "grpo-opd": ["--teacher_tau", str(TEACHER_TAU), "--adv_tau", "1.0"],
    "opd": ["--teacher_tau", str(TEACHER_TAU), "--adv_tau", "0.0"],
}
SEEDS = (0, 1, 2)
STEPS = int(os.environ.get("GRPO_STEPS", "100"))  # a session's share: GRPO_STEPS=10 bash lab/gpu_box/coder.sh ... start
STARTUP_S = 300  # before train() (student, engine, teacher: ~2 min) + the step that ends past the budget + its save


def session_deadline(file: Path) -> float | None:
    """When the session's runs must end (unix seconds): WORK/deadline (`coder.sh deadline S`: read when each run
    starts, so it can be moved while the lanes run), else GRPO_DEADLINE, else None."""
    text = file.read_text().strip() if file.exists() else os.environ.get("GRPO_DEADLINE", "")
    return float(text) if text else None


def time_budget(deadline: float | None, now: float, train_seconds: float | None = None) -> tuple[list[str], int] | None:
    """A run's `--max_train_seconds` and the command's limit: `train_seconds` (the arms' equal budget:
    WORK/train_seconds, `coder.sh budget S`), cut to what `deadline` (unix seconds: the machine's end) leaves after
    STARTUP_S; None when that is under a minute. Neither: no budget, a 3-hour limit."""
    if deadline is None:
        return (["--max_train_seconds", str(int(train_seconds))], int(train_seconds + STARTUP_S + 600)) \
            if train_seconds else ([], 3 * 3600)
    seconds = min(deadline - now - STARTUP_S, train_seconds or float("inf"))
    if seconds < 60:
        return None
    return ["--max_train_seconds", str(int(seconds))], int(deadline - now + 30)


def read_number(file: Path) -> float | None:
    """A number written to a file of the work folder (`coder.sh budget S`), None without the file."""
    return float(file.read_text()) if file.exists() and file.read_text().strip() else None
SMOKE = ["--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--use_vllm", "false",
         "--gradient_checkpointing", "false", "--max_steps", "1", "--num_generations", "2",
         "--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "1", "--max_turns", "1",
         "--max_tokens_per_turn", "24", "--max_completion_length", "24", "--max_prompt_tokens", "1500",
         "--max_tasks", "2", "--sandbox_workers", "2", "--save_strategy", "no", "--collapse_guard", "warn"]


def training_ids(train_ids: list[str]) -> list[str]:
    """The training tasks GRPO sees: the ARC-AGI-1 training split without its 100 validation tasks."""
    held_out = set(validation_ids(train_ids))
    return [task for task in sorted(train_ids) if task not in held_out]


def harness_options(harness: Arm) -> list[str]:
    """The harness the warm start was trained in (the chosen arm), as `arc-trl train` options."""
    argv = ["--agent_mode", harness.agent_mode, "--check_transform", str(harness.check_transform).lower(),
            "--max_turns", str(harness.max_turns), "--max_tokens_per_turn", str(harness.max_tokens_per_turn),
            "--max_completion_length", str(harness.max_completion_length)]
    return argv + ["--prompt_template", str(ROOT / harness.prompt_template)] if harness.prompt_template else argv


def train_argv(student: Path, teacher: Path | None, arm: str, seed: int, out: Path, task_ids: list[str],
               harness: Arm, steps: int = STEPS, smoke: bool = False) -> list[str]:
    """`arc-trl train`'s command for one arm and seed (`teacher`: the merged 1.5B, needed by the OPD arms), in the
    warm start's `harness`."""
    if arm not in ARMS:
        raise ValueError(f"arm {arm!r} is not one of {', '.join(ARMS)}")
    argv = [sys.executable, "-m", "arc_trl", "train", "--config", str(ROOT / CONFIG), "--model_name_or_path",
            str(student), "--output_dir", str(out), "--seed", str(seed), "--max_steps", str(steps),
            "--dataset", TRAIN, "--task_ids", *task_ids, *harness_options(harness)]
    if ARMS[arm]:
        if teacher is None:
            raise ValueError(f"arm {arm!r} needs the teacher (the warm-started 1.5B)")
        argv += ["--teacher_backend", "local", "--teacher_model", str(teacher), *ARMS[arm]]
    return argv + (SMOKE if smoke else [])


def grpo(work: Any, arm: str, seed: int, queue: Any) -> int:
    """One arm and seed: both warm starts (made or reused by `queue.warm_model`), then the training run through
    `queue.command`; 0 once its run_summary.json exists (a resumed queue does not train it again). `work` and `queue`
    are arc_experiments.coder.run's Work and module (passed in: run imports this module)."""
    command, train_ids, warm_model = queue.command, queue.train_ids, queue.warm_model
    out = work.path("grpo", f"{arm}-s{seed}")
    if (out / "run_summary.json").exists():
        return 0
    student = warm_model(work, "qwen05")
    teacher = warm_model(work, "qwen15") if ARMS[arm] else None
    if student is None or (ARMS[arm] and teacher is None):
        return 1
    budget = time_budget(session_deadline(work.path("deadline")), time.time(), read_number(work.path("train_seconds")))
    if budget is None:
        say(f"   grpo-qwen05-{arm}-s{seed}: under a minute to train before the session's deadline, not started")
        return 1
    argv = train_argv(student, teacher, arm, seed, out, training_ids(train_ids()), queue.chosen(work),
                      smoke=work.smoke)
    return command(work, f"grpo-qwen05-{arm}-s{seed}", argv + budget[0], limit=budget[1])


def trained(out: Path) -> bool:
    """A finished run with its final adapter (a stand-in run_summary, `placeholder`, is not one)."""
    summary = out / "run_summary.json"
    return summary.exists() and "placeholder" not in summary.read_text() and (out / "adapter_config.json").exists()


def evaluate(work: Any, arm: str, seed: int, queue: Any) -> int:
    """A finished run's final adapter on the warm 0.5B: the 100 validation tasks (the choice of a run's steps and
    arm) and the ARC-AGI-1 evaluation tasks (reported only), 8 attempts each, in the warm start's harness; the same
    session's warm/qwen05/{validation,eval} are the baseline they are paired with."""
    from arc_experiments.coder.plan import EVAL, N_ZERO_SHOT, generate_argv

    out = work.path("grpo", f"{arm}-s{seed}")
    served = queue.warm_model(work, "qwen05")
    if served is None:
        return 1
    harness = queue.chosen(work)
    splits = {"validation": (TRAIN, validation_ids(queue.train_ids())), "eval": (EVAL, None)}
    jobs = [(out / split, generate_argv(served, harness, dataset, out / split, N_ZERO_SHOT, ids, adapter=out),
             N_ZERO_SHOT) for split, (dataset, ids) in splits.items()]
    return queue.generate_folders(work, f"eval-grpo-qwen05-{arm}-s{seed}", served, jobs, background_score=True)


def grpo_stages(work: Any, warm_ready: Callable[[str], bool], queue: Any) -> list[Stage]:
    """A stage per arm and seed, the OPD arm's first seed first (its step 1 measures the gap), then seed by seed."""
    order = [("grpo-opd", 0), ("grpo", 0), ("opd", 0)] + [(a, s) for s in SEEDS[1:] for a in ARMS]

    def ready(arm: str) -> bool:
        return warm_ready("qwen05") and (not ARMS[arm] or warm_ready("qwen15"))

    runs = [(f"grpo-qwen05-{arm}-s{seed}", lambda arm=arm: ready(arm),
             lambda arm=arm, seed=seed: grpo(work, arm, seed, queue)) for arm, seed in order]
    evaluations = [(f"eval-grpo-qwen05-{arm}-s{seed}",
                    lambda arm=arm, seed=seed: trained(work.path("grpo", f"{arm}-s{seed}")) and warm_ready("qwen05"),
                    lambda arm=arm, seed=seed: evaluate(work, arm, seed, queue)) for arm, seed in order]
    return runs + evaluations
