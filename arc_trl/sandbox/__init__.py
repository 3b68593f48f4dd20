"""Sandboxed execution of model-written Python (hostile input). See docs/sandbox.md for the guarantees."""

from arc_trl.sandbox.code_blocks import extract_code_blocks, extract_program, is_python_code, parses
from arc_trl.sandbox.config import SandboxConfig
from arc_trl.sandbox.forkserver import SandboxError
from arc_trl.sandbox.observation import format_exec_result
from arc_trl.sandbox.pool import SandboxPool
from arc_trl.sandbox.replay import replay_attempt
from arc_trl.sandbox.results import STATUSES, ExecResult, ProgramResult, TurnResult
from arc_trl.sandbox.session import Session

__all__ = [
    "STATUSES",
    "ExecResult",
    "ProgramResult",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "Session",
    "TurnResult",
    "extract_code_blocks",
    "extract_program",
    "format_exec_result",
    "is_python_code",
    "parses",
    "replay_attempt",
]
