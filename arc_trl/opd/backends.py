"""The teacher backends, one entry each under the name `teacher_backend` takes, and `build_teacher`.

`ArcConfig` takes its choices from `TEACHER_BACKENDS`, with the key a backend cannot do without (`needs`) and the words
of its help; the trainer builds its teacher with `build_teacher`. Each builder imports its backend when called, so
this module imports nothing of torch or TRL: the config reads it when it is loaded. A new backend: its module in this
folder and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TeacherBackend:
    build: Callable[[Any], Any]  # the trainer -> its teacher (None: no teacher)
    help: str = ""  # what it is, in `teacher_backend`'s help
    needs: tuple[str, str] | None = None  # (the ArcConfig key it cannot do without, what that key holds)


def _no_teacher(trainer) -> None:
    return None


def _local(trainer):
    from arc_trl.opd.local import LocalTeacher

    arc = trainer.arc_config
    return LocalTeacher.from_pretrained(
        arc.teacher_model,
        pad_token_id=trainer.processing_class.pad_token_id,
        accelerator=trainer.accelerator,
        dtype=trainer.model.dtype,
        batch_size=arc.teacher_batch_size,
    )


def _base(trainer):
    from arc_trl.opd.local import BaseModelTeacher

    return BaseModelTeacher(trainer, batch_size=trainer.arc_config.teacher_batch_size)


def _server(trainer):
    from arc_trl.opd.server import ServerTeacher

    arc = trainer.arc_config
    return ServerTeacher(
        arc.teacher_server_url,
        timeout_s=arc.teacher_timeout_s,
        max_retries=arc.teacher_max_retries,
        batch_size=arc.teacher_batch_size,
    )


def _policy(trainer):
    from arc_trl.opd.local import PolicyTeacher

    return PolicyTeacher(trainer, batch_size=trainer.arc_config.teacher_batch_size)


TEACHER_BACKENDS: dict[str, TeacherBackend] = {
    "none": TeacherBackend(_no_teacher),
    "local": TeacherBackend(_local, "a model loaded next to the trainer", ("teacher_model", "a path or hub id")),
    "base": TeacherBackend(_base, "LoRA: the frozen base model, adapter disabled"),
    "server": TeacherBackend(_server, "a vLLM OpenAI server, prompt_logprobs",
                             ("teacher_server_url", "e.g. http://localhost:8001")),
    "policy": TeacherBackend(_policy, "the live policy itself, adapter on, no grad: a self-teacher, with a privileged "
                             "prompt such as peer"),
}


def build_teacher(trainer):
    """The teacher of `trainer.arc_config.teacher_backend` (None for `none`)."""
    return TEACHER_BACKENDS[trainer.arc_config.teacher_backend].build(trainer)
