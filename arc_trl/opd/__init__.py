"""The OPD room: on-policy distillation's teacher term and its teachers. A new teacher backend touches this folder
only: its module and one entry of `backends.TEACHER_BACKENDS` (the names `ArcConfig.teacher_backend` takes).

    from arc_trl.opd import opd_advantages, teacher_stats, build_teacher, LocalTeacher

- `teacher_math.py`: the per-token teacher term as pure tensor functions (`opd_advantages`, `teacher_stats`);
- `backends.py`: the registry of teacher backends and `build_teacher`;
- `teacher.py`: the interface every teacher has (`score`, `submit`); `local.py`: the teachers in the trainer's
  process (a separate model, the frozen LoRA base, the live policy); `server.py`: a vLLM server;
- `peer.py`: the peer teacher's rules (who teaches whom, the block it sees).

The trainer's side of the term (scoring a generation batch, writing it into TRL's batch) is
`arc_trl/trainer/teacher_term.py`. The names below are imported on first use (PEP 562): the config reads
`backends.py` without loading torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "TeacherStats": "arc_trl.opd.teacher_math",
    "opd_advantages": "arc_trl.opd.teacher_math",
    "teacher_log_ratio": "arc_trl.opd.teacher_math",
    "teacher_stats": "arc_trl.opd.teacher_math",
    "TEACHER_BACKENDS": "arc_trl.opd.backends",
    "build_teacher": "arc_trl.opd.backends",
    "Teacher": "arc_trl.opd.teacher",
    "TeacherUnavailableError": "arc_trl.opd.teacher",
    "LocalTeacher": "arc_trl.opd.local",
    "BaseModelTeacher": "arc_trl.opd.local",
    "PolicyTeacher": "arc_trl.opd.local",
    "ServerTeacher": "arc_trl.opd.server",
}

__all__ = [  # the same names as _EXPORTS
    "TeacherStats", "opd_advantages", "teacher_log_ratio", "teacher_stats", "TEACHER_BACKENDS", "build_teacher",
    "Teacher", "TeacherUnavailableError", "LocalTeacher", "BaseModelTeacher", "PolicyTeacher", "ServerTeacher",
]

if TYPE_CHECKING:
    from arc_trl.opd.backends import TEACHER_BACKENDS, build_teacher
    from arc_trl.opd.local import BaseModelTeacher, LocalTeacher, PolicyTeacher
    from arc_trl.opd.server import ServerTeacher
    from arc_trl.opd.teacher import Teacher, TeacherUnavailableError
    from arc_trl.opd.teacher_math import TeacherStats, opd_advantages, teacher_log_ratio, teacher_stats


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'arc_trl.opd' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
