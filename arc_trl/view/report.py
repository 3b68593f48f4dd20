"""The self-contained HTML report of `arc-trl view`: one file that opens from disk, no server, no network.

A sortable, filterable table of the tasks (solved, attempts, best pixel score, status, turns, tokens) and, per task,
its train pairs and test inputs drawn in the ARC palette, and each attempt: every turn's message with its code
highlighted (pygments), the sandbox's output and errors (the last one, which the model never saw, marked so), the
submitted grids beside the expected ones with the differing cells marked, the reward and its parts.

Model output is hostile input: every text from a completion goes through the template engine's autoescaping
(jinja2, `autoescape=True`) or pygments' escaping, and the page's Content-Security-Policy lets only the report's own
script run (by its hash), so no markup in a completion can run code. Each task's details sit in an inert
`<template>` until it is opened, which keeps a 400-task report quick to open.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from arc_trl.data.task import Grid
from arc_trl.eval.error_kinds import KINDS
from arc_trl.view.grids import differing_cells, grid_svg
from arc_trl.view.records import AttemptView, Source, TaskView

TEMPLATE = "report.html.jinja"
SCRIPT = "report.js"
STYLE = "report.css"
MAX_TEXT_CHARS = 50_000  # a message or an output longer than this is cut in the report (the record keeps it all)


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["grid"] = lambda grid, expected=None, box=160: _grid(_frozen(grid), _frozen(expected), box)
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    env.filters["num"] = lambda v: "-" if v is None else (f"{v:.0f}" if abs(v) >= 10 else f"{v:.2g}")
    env.filters["cut"] = _cut
    env.globals["segments"] = message_segments
    env.globals["shape"] = lambda g: f"{len(g)}x{len(g[0]) if g else 0}" if g else "-"
    env.globals["diff_count"] = lambda g, e: differing_cells(g, e)
    env.globals["pairs"] = pairs
    return env


def _frozen(grid: Grid | None) -> tuple | None:
    return None if grid is None else tuple(tuple(row) for row in grid)


@lru_cache(maxsize=4096)
def _grid(grid: tuple, expected: tuple | None, box: int) -> Markup:
    """A grid's SVG, drawn once per report however often it is shown (expected grids are shown per attempt)."""
    return Markup(grid_svg(grid, expected, box))


def _cut(text: str | None) -> str:
    if text is None:
        return ""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    return text[:MAX_TEXT_CHARS] + f"\n[... {len(text) - MAX_TEXT_CHARS} more characters not shown]"


@lru_cache(maxsize=1)
def _formatter():
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True)


def highlight(code: str) -> Markup:
    """Python source as escaped, highlighted HTML (pygments escapes every character of `code`)."""
    from pygments import highlight as pygments_highlight
    from pygments.lexers import PythonLexer

    return Markup(pygments_highlight(_cut(code), PythonLexer(), _formatter()))


def message_segments(text: str) -> Iterator[tuple[str, Any]]:
    """("text", str) and ("code", highlighted Markup) pieces of an assistant message: its code blocks are those the
    sandbox runs (`arc_trl.sandbox.code_blocks.extract_code_blocks`), their fence lines dropped."""
    from arc_trl.sandbox.code_blocks import extract_code_blocks

    text = _cut(text or "")
    pos = 0
    for block in extract_code_blocks(text):
        at = text.find(block, pos)
        if at < 0:  # not found verbatim (line breaks normalised): show the rest as text
            break
        before = text[pos:at]
        opening = before.rstrip("\n").rpartition("\n")
        if opening[2].lstrip().startswith(("```", "~~~")):
            before = opening[0]
        if before.strip():
            yield "text", before.strip("\n")
        yield "code", highlight(block)
        pos = at + len(block)
        rest = text[pos:].lstrip("\n")
        if rest.lstrip().startswith(("```", "~~~")):
            line_end = rest.find("\n")
            pos = len(text) if line_end < 0 else len(text) - len(rest) + line_end + 1
    if text[pos:].strip():
        yield "text", text[pos:].strip("\n")


def _style() -> str:
    return (Path(__file__).parent / STYLE).read_text() + "\n" + _formatter().get_style_defs(".hl")


def _script() -> str:
    return (Path(__file__).parent / SCRIPT).read_text()


def script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()


def task_row(index: int, view: TaskView) -> dict[str, Any]:
    """The table row of a task: the values shown and the ones it sorts and filters by."""
    counts = view.kind_counts()
    solved = view.solved
    return {
        "index": index, "task_id": view.task_id, "solved": solved, "n_passed": view.n_passed,
        "attempts": len(view.attempts), "best_pixel": view.best_pixel,
        "status": next(iter(counts), "-") if not solved else "solved",
        "kinds": counts, "turns": view.mean_turns, "tokens": view.mean_tokens,
    }


def summary_lines(source: Source) -> list[str]:
    """The header's figures: tasks, attempts, solved; a scored folder's pass@k and Kaggle score."""
    tasks = source.tasks
    attempts = sum(len(t.attempts) for t in tasks)
    known = [t for t in tasks if t.solved is not None]
    lines = [f"{len(tasks)} tasks, {attempts} attempts" + (
        f"; solved {sum(bool(t.solved) for t in known)} of {len(known)}" if known else "")]
    if source.eval_dir is not None and source.metrics is not None:
        from arc_trl.eval.summary import headline

        lines.append(headline(source.eval_dir, source.dataset_tasks or None))
    return lines


def render_report(source: Source) -> str:
    """The report's HTML (module docstring)."""
    script = _script()
    counts: dict[str, int] = {}
    for view in source.tasks:
        for attempt in view.attempts:
            counts[attempt.kind] = counts.get(attempt.kind, 0) + 1
    return _environment().get_template(TEMPLATE).render(
        source=source, rows=[task_row(i, t) for i, t in enumerate(source.tasks)], tasks=source.tasks,
        summary=summary_lines(source), kinds=[k for k in KINDS if k in counts], kind_totals=counts,
        style=Markup(_style()), script=Markup(script), script_hash=script_hash(script),
    )


def write_report(source: Source, output: str | Path) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_report(source), encoding="utf-8")
    return output


def pairs(predictions: list[Grid | None], expected: list[Grid | None] | None) -> list[tuple[Any, Any]]:
    """(submitted, expected) per test input, as long as the longer of the two."""
    expected = list(expected or [])
    n = max(len(predictions), len(expected))
    return [(predictions[i] if i < len(predictions) else None, expected[i] if i < len(expected) else None)
            for i in range(n)]


__all__ = ["AttemptView", "highlight", "message_segments", "pairs", "render_report", "write_report"]
