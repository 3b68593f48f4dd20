"""`ArcScriptArguments`: the keys of a training YAML that only `arc-trl train` / `scripts/train.py` and the launchers
read, never the trainer.

TRL's `ScriptArguments` idiom: a dataclass parsed by `trl.TrlParser` next to `GRPOConfig`, `ModelConfig` and
`ArcConfig` from the same flat YAML, so these are top-level YAML keys and `--flags` like the others. They say which
tasks become the datasets (a Python caller builds its datasets itself and hands them to `ArcGRPOTrainer`), how the
tokenizer and model are loaded, and how a run is laid out on GPUs (`arc_trl/launch/launch_config.py`; the training
script accepts and ignores those). Everything the trainer reads is in `ArcConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arc_trl.config import defaults
from arc_trl.config.type_checks import field_type_problems


@dataclass
class ArcScriptArguments:
    # --- data: the tasks of the training and evaluation datasets (arc_trl.train_entry.build_datasets) -------------
    dataset: str = field(
        default="arc-agi-1/train",
        metadata={"help": "Training tasks: a bundled name (arc-agi-1/train, arc-agi-2/eval, ...), a Kaggle "
                  "*_challenges.json, a folder of task JSON files, or a synthetic spec (see docs/synthetic.md)."},
    )
    eval_dataset: str | None = field(
        default=None, metadata={"help": "Held-out tasks for in-training evaluation (eval_every_steps)."}
    )
    task_ids: list[str] | None = field(default=None, metadata={"help": "Only use these task ids."})
    max_tasks: int | None = field(default=None, metadata={"help": "Use at most this many tasks (after filtering)."})
    max_prompt_tokens: int | None = field(
        default=None, metadata={"help": "Drop tasks whose rendered prompt is longer than this many tokens."}
    )
    augment: bool = field(default=False, metadata={"help": "Apply a random dihedral + colour augmentation per row."})
    augment_copies: int = field(default=1, metadata={"help": "Rows per task when augment is on."})
    prompt_template: str | None = field(default=None, metadata={"help": "Path to a custom prompt template (YAML)."})

    # --- tokenizer and model loading ------------------------------------------------------------------------------
    chat_template: str = field(
        default=defaults.CHAT_TEMPLATE,
        metadata={"help": "auto: keep the model's template if prefix-stable, else use TRL's training variant; "
                  "chatml: the project's plain ChatML template; or a path to a .jinja file."},
    )
    use_unsloth: bool = field(default=False, metadata={"help": "Load the model with unsloth (single GPU, LoRA)."})

    # --- the run ----------------------------------------------------------------------------------------------------
    check_config: bool = field(
        default=False, metadata={"help": "A preflight: validate the config, load the tasks, the model's tokenizer (its "
                                 "folder or hub id) and the prompts within max_prompt_tokens, print the resolved "
                                 "values and exit without training."}
    )

    # --- launch layout (read from the YAML by `arc-trl serve` and the HTCondor wrapper) -------------------------------
    trainer_gpus: int = field(default=1, metadata={"help": "GPUs (processes) of the trainer under accelerate."})
    vllm_gpus: int | None = field(
        default=None, metadata={"help": "GPUs of the student `trl vllm-serve` (data parallel); default 1 if used."}
    )
    teacher_gpus: int | None = field(
        default=None, metadata={"help": "GPUs of the teacher `vllm serve` (tensor parallel); default 1 if used."}
    )
    vllm_server_args: str | None = field(default=None, metadata={"help": "Extra CLI args for `trl vllm-serve`."})
    teacher_server_args: str | None = field(default=None, metadata={"help": "Extra CLI args for `vllm serve`."})
    server_startup_timeout: float = field(default=900.0, metadata={"help": "Seconds to wait for servers' /health."})
    accelerate_config: str | None = field(
        default=None, metadata={"help": "accelerate config file for the trainer (e.g. accelerate_configs/zero2.yaml)."}
    )

    def __post_init__(self) -> None:
        type_problems = field_type_problems(self)
        if type_problems:
            raise ValueError("wrong value types:\n  " + "\n  ".join(type_problems))
