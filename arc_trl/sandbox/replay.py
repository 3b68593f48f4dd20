"""Replay one recorded attempt (a completion) in a fresh session and report its `AttemptOutcome`.

Modes:

- `repl`: run the completion's code blocks in order in one session (stopping after a valid SUBMIT); the SUBMIT gives
  the test predictions.
- `program`: program mode (`Session.run_program`): `transform` applied to every train and test input.
- `auto` (default): as `repl`; when no valid SUBMIT happened but the code left a callable `transform`, it is applied
  to the train and test inputs. A completion without fenced blocks that is itself Python is run as a program.

`outcome.extra` holds `status` (the most severe status of the attempt's runs, or `no_code`), `seconds`, `source`
(`submit`, `transform` or None: where the predictions came from) and, for failures to start a session, `error`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from arc_trl.data.task import ArcTask
from arc_trl.rewards.outcome import AttemptOutcome
from arc_trl.sandbox.code_blocks import extract_code_blocks, extract_program
from arc_trl.sandbox.forkserver import SandboxError
from arc_trl.sandbox.results import ProgramResult

if TYPE_CHECKING:
    from arc_trl.sandbox.pool import SandboxPool

MODES = ("auto", "repl", "program")
SEVERITY = ("ok", "error", "refused", "memory", "timeout", "crashed")  # least to most severe
_COARSE_KIND = {"timeout": "timeout", "memory": "memory", "crashed": "crash", "refused": "refused"}
REPLAY_MAX_BLOCKS = 64


def worst_status(statuses: list[str]) -> str:
    """The most severe status ('ok' for none)."""
    return max(statuses, key=SEVERITY.index, default="ok")


def coarse_error_kind(status: str, error_kind: str | None) -> str | None:
    """The `AttemptOutcome.error_kind` vocabulary: None, 'syntax', 'exception', 'timeout', 'memory', 'crash',
    'refused'."""
    if status == "ok":
        return None
    if status == "error":
        return "syntax" if error_kind == "SyntaxError" else "exception"
    return _COARSE_KIND.get(status, status)


def replay_attempt(pool: SandboxPool, task: ArcTask, completion_text: str, mode: str = "auto") -> AttemptOutcome:
    """Run a completion in a fresh session for `task` and return what it produced. Never raises for bad code."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    start = time.perf_counter()
    try:
        session = pool.new_session(task)
    except SandboxError as e:
        return AttemptOutcome(error_kind="crash", extra={"status": "crashed", "seconds": 0.0, "source": None,
                                                          "error": str(e)})
    with session:
        limit = pool.config.max_code_chars  # nothing longer is parsed in this process
        blocks = extract_code_blocks(completion_text, max_chars=limit)  # once per attempt
        program = None
        if mode == "program" or (mode == "auto" and not blocks):
            program = extract_program(completion_text, max_chars=limit, blocks=blocks)
        if mode == "program" or program is not None:
            outcome = _program_outcome(session.run_program_code(program))
        else:
            outcome = _repl_outcome(session, blocks, allow_transform=mode == "auto")
    outcome.extra["seconds"] = time.perf_counter() - start
    return outcome


def _repl_outcome(session, blocks: list[str], allow_transform: bool) -> AttemptOutcome:
    turn = session.run_blocks(blocks, max_blocks=REPLAY_MAX_BLOCKS)
    statuses = [r.status for r in turn.results]
    outcome = AttemptOutcome(
        code_found=turn.code_found, code_parsed=turn.code_parsed, num_turns=1, num_code_runs=len(turn.results),
        num_errors=sum(s != "ok" for s in statuses), num_timeouts=sum(s == "timeout" for s in statuses),
    )
    source = None
    if turn.submitted is not None:
        outcome.test_predictions = list(turn.submitted)
        outcome.submitted = True
        source = "submit"
    elif allow_transform and turn.results and turn.results[-1].has_transform:
        program = session.apply_transform()
        outcome.test_predictions = program.test_outputs
        outcome.train_predictions = program.train_outputs
        outcome.num_timeouts += program.num_timeouts
        statuses += _call_statuses(program)
        source = "transform"
    status = worst_status(statuses) if turn.code_found else "no_code"
    last_bad = next((r for r in reversed(turn.results) if r.status == worst_status(statuses)), None)
    last_kind = last_bad.error_kind if last_bad else None
    outcome.error_kind = coarse_error_kind(status, last_kind) if turn.code_found else None
    outcome.extra.update(status=status, source=source)
    return outcome


def _call_statuses(program: ProgramResult) -> list[str]:
    """Statuses of the transform calls (their error strings start with the status)."""
    return [(e.split(":", 1)[0] if e.split(":", 1)[0] in SEVERITY else "error") if e else "ok" for e in program.errors]


def _program_outcome(program: ProgramResult) -> AttemptOutcome:
    statuses = [program.load.status] if program.load is not None else []
    if program.compiled:
        statuses += _call_statuses(program)
    status = worst_status(statuses) if program.code_found else "no_code"
    kind = None
    if program.code_found:
        load_kind = program.load.error_kind if program.load is not None else None
        kind = coarse_error_kind(status, load_kind if program.load and program.load.status == status else None)
    outcome = AttemptOutcome(
        code_found=program.code_found, code_parsed=program.code_parsed,
        test_predictions=program.test_outputs if program.compiled else None,
        train_predictions=program.train_outputs if program.compiled else None,
        error_kind=kind, num_turns=1, num_code_runs=1 if program.load is not None else 0,
        num_errors=sum(s != "ok" for s in statuses), num_timeouts=sum(s == "timeout" for s in statuses),
    )
    outcome.extra.update(status=status, source="transform" if program.compiled else None)
    return outcome
