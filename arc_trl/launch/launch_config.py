"""The keys of a training YAML that say how a run is laid out on GPUs. They are fields of `ArcScriptArguments`
(arc_trl/config/script_args.py: `arc-trl train` accepts and ignores them); `arc-trl serve` and the HTCondor resource
defaults read them from the YAML, where a missing key takes the default below (the same as the field's).

GPU split of one job, assigned in this order from the GPUs the job sees (CUDA_VISIBLE_DEVICES):
  vllm_gpus    -> the student inference server (`trl vllm-serve`, when use_vllm: true and vllm_mode: server);
                  default 1 in that mode, else 0; split as data parallel x vllm_tensor_parallel_size
  trainer_gpus -> `accelerate launch --num_processes trainer_gpus scripts/train.py` (default 1; 0: CPU)
  teacher_gpus -> the teacher server (`vllm serve teacher_model`, when teacher_backend: server), its tensor
                  parallel size; default 1 with a teacher server, else 0
The prime-rl ARC fork's 4-GPU layout (vllm_gpus: 2, trainer_gpus: 1, teacher_gpus: 1) gives GPUs 0-1 / 2 / 3.
Other keys: accelerate_config (passed as --config_file), vllm_server_args / teacher_server_args (extra command-line
arguments of the two servers, one string), server_startup_timeout (seconds to wait for the health endpoints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LAUNCH_DEFAULTS: dict[str, Any] = {
    "trainer_gpus": 1,
    "vllm_gpus": None,  # derived (see above)
    "teacher_gpus": None,  # derived (see above)
    "accelerate_config": None,
    "vllm_server_args": None,
    "teacher_server_args": None,
    "server_startup_timeout": 900.0,
}


@dataclass(frozen=True)
class GpuSplit:
    vllm: int
    trainer: int
    teacher: int

    @property
    def total(self) -> int:
        return self.vllm + self.trainer + self.teacher


def launch_value(config: dict, key: str) -> Any:
    value = config.get(key)
    return LAUNCH_DEFAULTS[key] if value is None else value


def needs_student_server(config: dict) -> bool:
    return bool(config.get("use_vllm", False)) and config.get("vllm_mode", "colocate") == "server"


def needs_teacher_server(config: dict) -> bool:
    return config.get("teacher_backend", "none") == "server"


def _count(config: dict, key: str, default: int) -> int:
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a non-negative integer, got {value!r}")
    return value


def gpu_split(config: dict) -> GpuSplit:
    """GPUs per role for a (flat) training config; raises ValueError for GPUs given to a role that is off."""
    student, teacher = needs_student_server(config), needs_teacher_server(config)
    split = GpuSplit(
        vllm=_count(config, "vllm_gpus", 1 if student else 0),
        # use_cpu: true trains on the CPU: no GPU for the trainer unless the config gives it some
        trainer=_count(config, "trainer_gpus", 0 if config.get("use_cpu") is True else LAUNCH_DEFAULTS["trainer_gpus"]),
        teacher=_count(config, "teacher_gpus", 1 if teacher else 0),
    )
    if split.vllm and not student:
        raise ValueError(f"vllm_gpus={split.vllm} but no student server is used (needs use_vllm: true and "
                         "vllm_mode: server)")
    if student and not split.vllm:
        raise ValueError("use_vllm with vllm_mode: server needs vllm_gpus >= 1")
    if split.teacher and not teacher:
        raise ValueError(f"teacher_gpus={split.teacher} but teacher_backend is not 'server'")
    if teacher and not split.teacher:
        raise ValueError("teacher_backend: server needs teacher_gpus >= 1")
    return split


def known_config_keys() -> set[str]:
    """Every top-level key `arc-trl train` accepts: the fields of GRPOConfig, ModelConfig, ArcConfig and
    ArcScriptArguments, plus `env` (TrlParser's environment block). Imports trl (a few seconds)."""
    from arc_trl.train_entry import known_keys

    return known_keys()
