"""Find the Python code in an assistant message.

The rule (also in docs/sandbox.md):

- A code block is a fenced block: an opening line of three or more backticks (or tildes) followed by an optional
  language tag, and a closing line of at least as many of the same character. Fences may be indented.
- Blocks tagged `python`, `py`, `python3` or `py3` (any case) are code, whatever they contain.
- Untagged blocks (a bare fence) are code only when they parse as Python and contain at least one statement that is
  not a plain literal or a lone name (so a grid written as digits, a JSON list, or a single word is not run).
- Blocks with any other tag (`text`, `json`, `bash`, `output`, ...) are never code.
- A block still open at the end of the message (generation stopped mid-block) counts by the same rules.

`extract_program` is program mode: all code blocks joined in order (a later `transform` overrides an earlier one),
or, when the message has no fenced block at all, the whole message if it parses and defines `transform` at top
level.
"""

from __future__ import annotations

import ast
import re

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")


def extract_code_blocks(text: str) -> list[str]:
    """The code blocks of `text`, in order (see the module docstring for the rule)."""
    if not isinstance(text, str):
        raise TypeError(f"expected the assistant text as str, got {type(text).__name__}")
    blocks: list[str] = []
    fence: str | None = None
    tag = ""
    lines: list[str] = []
    for line in text.splitlines():
        if fence is None:
            match = _FENCE_OPEN.match(line)
            if match:
                fence = match.group("fence")
                tag = match.group("info").split()[0].lower() if match.group("info").strip() else ""
                lines = []
            continue
        stripped = line.strip()
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            _keep(blocks, "\n".join(lines), tag)
            fence = None
            continue
        lines.append(line)
    if fence is not None:
        _keep(blocks, "\n".join(lines), tag)
    return blocks


def _keep(blocks: list[str], code: str, tag: str) -> None:
    if tag in PYTHON_TAGS:
        if code.strip():
            blocks.append(code)
    elif tag == "" and is_python_code(code):
        blocks.append(code)


def parses(code: str) -> bool:
    """True when `code` is syntactically valid Python (never raises, whatever the input)."""
    try:
        ast.parse(code)
        return True
    except Exception:  # noqa: BLE001  SyntaxError, ValueError (null bytes), RecursionError, MemoryError...
        return False


def is_python_code(code: str) -> bool:
    """True when `code` parses and has a statement other than a literal expression (e.g. a grid of digits)."""
    if not code.strip():
        return False
    try:
        tree = ast.parse(code)
    except Exception:  # noqa: BLE001
        return False
    return any(not _is_literal_statement(stmt) for stmt in tree.body)


def _is_literal_statement(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Expr):
        return False
    if isinstance(stmt.value, ast.Name):
        return True
    try:
        ast.literal_eval(stmt.value)
        return True
    except Exception:  # noqa: BLE001
        return False


def extract_program(text: str) -> str | None:
    """Program-mode code of a completion, or None when it has none."""
    blocks = extract_code_blocks(text)
    if blocks:
        return "\n\n".join(blocks)
    if "```" not in text and "~~~" not in text and defines_transform(text):
        return text
    return None


def defines_transform(code: str) -> bool:
    """True when `code` parses and defines a top-level function named `transform`."""
    try:
        tree = ast.parse(code)
    except Exception:  # noqa: BLE001
        return False
    return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "transform" for s in tree.body)
