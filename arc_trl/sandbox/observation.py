"""The text sent back to the model after it wrote code: outputs, errors, and notes on what the sandbox did."""

from __future__ import annotations

from arc_trl.sandbox.results import ExecResult

NO_CODE = ("No code was run: your message has no ```python code block. Write the code you want to execute in a "
           "```python block.")
NO_OUTPUT = "(no output)"


def format_exec_result(result: ExecResult) -> str:
    """stdout, then stderr (tracebacks), then the sandbox's notes, for one code block."""
    parts = []
    if result.stdout.strip():
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr.strip():
        parts.append(result.stderr.rstrip("\n"))
    if result.submit_error and result.submit_error not in result.stderr:
        parts.append(result.submit_error)
    if result.note:
        parts.append(f"[{result.note}]")
    if result.submitted is not None:
        n = len(result.submitted)
        parts.append(f"SUBMIT accepted: {n} grid{'s' if n != 1 else ''} recorded.")
    return "\n".join(parts) if parts else NO_OUTPUT


def format_turn(results: list[ExecResult], n_blocks: int, skipped_after_submit: int, skipped_over_cap: int) -> str:
    """The observation for one assistant turn. Blocks get headers only when there are several."""
    if n_blocks == 0:
        return NO_CODE
    if len(results) == 1 and n_blocks == 1:
        return format_exec_result(results[0])
    sections = [f"--- code block {i + 1} ---\n{format_exec_result(r)}" for i, r in enumerate(results)]
    if skipped_after_submit:
        sections.append(f"[SUBMIT ended the episode; the {skipped_after_submit} code block(s) after it were not run.]")
    if skipped_over_cap:
        sections.append(f"[Only the first {len(results)} code blocks of a message are run; "
                        f"{skipped_over_cap} were skipped.]")
    return "\n".join(sections)
