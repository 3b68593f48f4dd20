"""`TtrlArguments`: the keys only `arc-trl ttrl` reads (the model's other keys are `arc-trl train`'s), and the checks
that keep a test-time run honest: no teacher prompt carrying the held-out output, no held-out evaluation set."""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_trl.config.type_checks import field_type_problems

# teacher_privileged values whose teacher prompt holds no test output of the leave-one-out task: the student's own
# prompt (none) or another episode's code (peer). solutions would append the held-out output; program needs a
# reference program, which a leave-one-out task does not have.
LEAK_FREE_TEACHER_PROMPTS = ("none", "peer")


@dataclass
class TtrlArguments:
    adapter: str | None = field(
        default=None, metadata={"help": "A PEFT LoRA adapter on model_name_or_path: merged once into "
                                "output_dir/start_model, the model every task starts from."})
    adapt: bool = field(
        default=True, metadata={"help": "false: no GRPO, every task attempted by the start model with the same "
                                "attempts and vote (the baseline a test-time run is compared with, task by task)."})
    n_attempts: int = field(
        default=8, metadata={"help": "Episodes played on each task's real test inputs after adaptation; their "
                             "predictions are voted into attempt_1 and attempt_2."})
    attempt_temperature: float | None = field(
        default=None, metadata={"help": "Sampling temperature of those episodes (default: temperature)."})
    task_max_seconds: float | None = field(
        default=None, metadata={"help": "Training time per task (seconds): training ends after the first optimizer "
                                "step that ends past it (max_steps still caps the steps). null: no time cap."})
    total_max_seconds: float | None = field(
        default=None, metadata={"help": "Time budget of the whole run (seconds, from the command's start): a task is "
                                "not started once it is spent; each task's training is capped by what is left."})
    reserve_seconds: float = field(
        default=0.0, metadata={"help": "Seconds of total_max_seconds held back for the last task's attempts and the "
                               "submission: training of a task ends that long before the total budget does."})
    keep_adapters: bool = field(
        default=False, metadata={"help": "Save each task's adapted LoRA to output_dir/tasks/TASK_ID/adapter."})
    fallback: str = field(
        default="zero", metadata={"help": "Placeholder grid where a test input has no predicted attempt: zero ([[0]]) "
                                  "or input (the test input)."})
    score: bool = field(
        default=False, metadata={"help": "After submission.json is written, score it against the dataset's solutions "
                                 "(read only then; a Kaggle file's sibling *_solutions.json or `solutions`)."})
    solutions: str | None = field(
        default=None, metadata={"help": "Kaggle solutions file for score, when not beside the challenges file."})

    def __post_init__(self) -> None:
        problems = field_type_problems(self)
        if problems:
            raise ValueError("wrong value types:\n  " + "\n  ".join(problems))
        if self.n_attempts < 1:
            raise ValueError(f"n_attempts must be >= 1, got {self.n_attempts}")
        for name in ("task_max_seconds", "total_max_seconds"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 or null (no cap), got {value}")
        if self.reserve_seconds < 0:
            raise ValueError(f"reserve_seconds must be >= 0, got {self.reserve_seconds}")
        if self.attempt_temperature is not None and not self.attempt_temperature > 0:
            raise ValueError(f"attempt_temperature must be > 0, got {self.attempt_temperature}")
        from arc_trl.eval.submission import FALLBACKS

        if self.fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {list(FALLBACKS)}, got {self.fallback!r}")


def ttrl_config_problems(script, arc) -> list[str]:
    """What in the training keys a test-time run cannot honour, one line each naming the key ([]: none)."""
    problems = []
    if arc.teacher_privileged not in LEAK_FREE_TEACHER_PROMPTS:
        problems.append(f"teacher_privileged: {arc.teacher_privileged!r} would put the held-out pair's output (or a "
                        f"reference program) into the teacher's prompt; ttrl allows {list(LEAK_FREE_TEACHER_PROMPTS)}")
    if script.eval_dataset is not None or arc.eval_every_steps > 0:
        problems.append("eval_dataset / eval_every_steps: ttrl has no held-out evaluation during adaptation (the "
                        "test outputs are unknown); unset them")
    return problems
