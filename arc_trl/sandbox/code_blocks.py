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

Size limit (`max_chars`, the sandbox passes `SandboxConfig.max_code_chars`): text longer than it is never parsed
here, so a huge completion costs the caller no parsing time or memory. An untagged block over the limit, or a
fence-less message over the limit that contains `def transform`, is returned as code all the same, and the sandbox
refuses it unrun with a note saying why (`code_too_long`). Tagged blocks are never parsed here at all: the sandbox
compiles them in its own process and reports whether they compiled.
"""

from __future__ import annotations

import ast
import re

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")


_OTHER_LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines breaks lines, besides \n
_FENCE_MARKS = ("```", "~~~")


def extract_code_blocks(text: str, max_chars: int | None = None) -> list[str]:
    """The code blocks of `text`, in order (see the module docstring for the rule; untagged blocks longer than
    `max_chars` are kept unparsed).

    Lines are those of `text.splitlines()`. Only the lines that start with a fence are looked at in Python (found by
    substring search), so a long block costs a few slices, not a loop over its lines.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected the assistant text as str, got {type(text).__name__}")
    if any(c in text for c in _OTHER_LINE_BREAKS):  # the same lines, separated by \n only (a final break kept)
        text = "\n".join(text.splitlines()) + ("\n" if text[-1] in _OTHER_LINE_BREAKS + "\n" else "")
    blocks: list[str] = []
    fence: str | None = None
    tag = ""
    body_start = 0
    for start, end in _fence_like_lines(text):
        line = text[start:end]
        if fence is None:
            match = _FENCE_OPEN.match(line)
            if match:
                fence = match.group("fence")
                tag = match.group("info").split()[0].lower() if match.group("info").strip() else ""
                body_start = end + 1  # after the opening line's newline
            continue
        stripped = line.strip()
        if set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            _keep(blocks, text[body_start:start - 1], tag, max_chars)  # without the newline before the fence
            fence = None
    if fence is not None:
        body = text[body_start:]
        _keep(blocks, body[:-1] if body.endswith("\n") else body, tag, max_chars)
    return blocks


def _fence_like_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line (newline-separated) whose first non-blank characters are ``` or ~~~, in order."""
    lines = []
    for mark in _FENCE_MARKS:
        at = text.find(mark)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            end = len(text) if end < 0 else end
            if not text[start:at].strip():
                lines.append((start, end))
            at = text.find(mark, end)
    return sorted(lines)


def _keep(blocks: list[str], code: str, tag: str, max_chars: int | None) -> None:
    if tag in PYTHON_TAGS:
        if code.strip():
            blocks.append(code)
    elif tag == "" and ((max_chars is not None and len(code) > max_chars) or is_python_code(code)):
        blocks.append(code)  # too long to parse here: the sandbox refuses it with a note


def parses(code: str) -> bool:
    """True when `code` compiles as a Python module, as the sandbox child checks it (never raises, whatever the
    input; nothing is run). Costs time and memory in proportion to the code: callers bound its length first."""
    try:
        compile(code, "<code>", "exec", dont_inherit=True)
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


def extract_program(text: str, max_chars: int | None = None, blocks: list[str] | None = None) -> str | None:
    """Program-mode code of a completion, or None when it has none. `blocks`: `extract_code_blocks(text, max_chars)`
    when the caller already has them."""
    if blocks is None:
        blocks = extract_code_blocks(text, max_chars)
    if blocks:
        return "\n\n".join(blocks)
    if "```" in text or "~~~" in text:
        return None
    if max_chars is not None and len(text) > max_chars:
        return text if _DEF_TRANSFORM.search(text) else None  # too long to parse here: refused by the sandbox
    return text if defines_transform(text) else None


_DEF_TRANSFORM = re.compile(r"^(?:async[ \t]+)?def[ \t]+transform\b", re.MULTILINE)


def defines_transform(code: str) -> bool:
    """True when `code` parses and defines a top-level function named `transform`."""
    if "transform" not in code:
        return False
    try:
        tree = ast.parse(code)
    except Exception:  # noqa: BLE001
        return False
    return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "transform" for s in tree.body)
