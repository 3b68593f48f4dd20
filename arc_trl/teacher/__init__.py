"""Teacher backends for on-policy distillation: they score the student's own token sequences by prefill."""

from arc_trl.teacher.base import Teacher, TeacherUnavailableError
from arc_trl.teacher.local import BaseModelTeacher, LocalTeacher, PolicyTeacher
from arc_trl.teacher.server import ServerTeacher

__all__ = ["Teacher", "TeacherUnavailableError", "LocalTeacher", "BaseModelTeacher", "PolicyTeacher", "ServerTeacher"]
