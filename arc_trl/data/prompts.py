"""Render an ARC task into the chat messages the model is prompted with.

Two agent modes share one layout, `[{"role": "system"}, {"role": "user"}]`:

- `repl`: multi-turn. The system message explains the sandbox (preloaded `train_inputs`, `train_outputs`,
  `test_inputs`, `np`; ```python blocks are executed and their output returned; finish with `SUBMIT(list_of_grids)`).
- `program`: single turn, BARC style. The model writes `def transform(grid)` in a ```python block.

The user message is: header, one block per train pair, one block per test input, footer (joined by blank lines).
Grids use the compact digit format of `arc_trl.data.grid_format`, with their shape ("3x4" = 3 rows, 4 columns).
Test outputs never appear, except in the *privileged* variant used by the distillation teacher: there a privileged
block (the test outputs and/or `metadata["reference_program"]`) is appended at the very end of the first user
message, after the footer. The system message and everything before it are identical to the student prompt.

Templates are `PromptTemplate` values; placeholders are written `{name}` and replaced literally (other braces in the
text are left alone, so code examples are safe). See docs/data.md for the placeholders of each field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from arc_trl.config.choices import AGENT_MODES
from arc_trl.data.grid_format import GRID_FORMATS, format_grid, grid_shape
from arc_trl.data.task import ArcTask

AgentMode = str  # one of AGENT_MODES
Privileged = bool | Literal["none", "auto", "solutions", "outputs", "program", "both"]

_GRIDS_EXPLAINED = (
    "Each puzzle has a few training examples: input grid -> output grid, all following the same hidden "
    "transformation. Find it and apply it to each test input.\n"
    "Grids are written one row per line, one digit per cell (colours 0-9); the shape is given as rows x columns."
)

REPL_SYSTEM = (
    "You are an expert at solving ARC (Abstraction and Reasoning Corpus) puzzles by writing Python code.\n"
    + _GRIDS_EXPLAINED
    + "\n\n"
    "You work in a Python REPL where these variables are preloaded:\n"
    "- `train_inputs`, `train_outputs`: lists of numpy int arrays, the training examples in order\n"
    "- `test_inputs`: list of numpy int arrays, the test inputs in order\n"
    "- `np`: numpy\n"
    "Write code in ```python blocks. The blocks of your message are executed in order, variables persist between "
    "blocks and turns, and the printed output and any errors come back to you in the next message.\n"
    "Study the examples, check your transformation on every training pair, and finish by calling "
    "`SUBMIT(list_of_grids)` with exactly one output grid (list of lists or numpy array) per test input, in the order "
    "of `test_inputs`. A valid SUBMIT ends the episode."
)

PROGRAM_SYSTEM = (
    "You are an expert at solving ARC (Abstraction and Reasoning Corpus) puzzles by writing Python code.\n"
    + _GRIDS_EXPLAINED
    + "\n\n"
    "Write a Python function `def transform(grid)` that implements the transformation. `grid` is a numpy int array; "
    "return the output grid as a list of lists or a numpy array. Put the complete code (imports included; numpy is "
    "available) in a single ```python block. It is run on every training and test input, and it is correct when it "
    "reproduces every training output."
)


@dataclass(frozen=True)
class PromptTemplate:
    """All text of a prompt. Placeholders (replaced literally):

    - `user_header`, `user_footer`: {num_train}, {num_test}
    - `train_pair`: {index} (0-based), {number} (1-based), {input}, {output}, {input_shape}, {output_shape}
    - `test_input`: {index}, {number}, {input}, {input_shape}
    - `privileged_output`: {index}, {number}, {output}, {output_shape}; `privileged_program`: {program}

    `grid_format` is not text: "digits" (`012`, the default) or "spaced" (`0 1 2`), how every grid is written.
    """

    system: str
    user_header: str
    user_footer: str
    train_pair: str
    test_input: str
    privileged_header: str = (
        "Privileged information (hidden from the solver): use it to guide your reasoning, but solve the task as if "
        "you had discovered the answer yourself, following the instructions above."
    )
    privileged_output: str = "Correct output for test input {number} ({output_shape}):\n{output}"
    privileged_program: str = "A reference program that solves this task:\n```python\n{program}\n```"
    grid_format: str = "digits"  # how {input} / {output} grids are written (arc_trl.data.grid_format)

    def __post_init__(self) -> None:
        if self.grid_format not in GRID_FORMATS:
            raise ValueError(f"grid_format must be one of {list(GRID_FORMATS)}, got {self.grid_format!r}")

    @classmethod
    def from_file(cls, path: str | Path, mode: AgentMode = "repl") -> PromptTemplate:
        """Load a template: a YAML mapping of fields (missing ones come from the default of `mode`, which the file may
        set with a `mode:` key), or any other file whose whole text becomes the system message."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"prompt template file {path} does not exist")
        text = path.read_text(encoding="utf-8")
        if path.suffix not in (".yaml", ".yml"):
            return replace(default_template(mode), system=text.strip())
        import yaml

        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as err:
            raise ValueError(f"{path}: invalid YAML: {err}") from None
        if not isinstance(data, dict):
            raise TypeError(f"{path}: expected a mapping of template fields, got {type(data).__name__}")
        data = dict(data)
        mode = data.pop("mode", mode)
        _check_mode(mode, f"{path}: mode")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown template field(s) {unknown}; known fields: {sorted(known)}")
        bad = sorted(k for k, v in data.items() if not isinstance(v, str))
        if bad:
            raise ValueError(f"{path}: template field(s) {bad} must be strings")
        try:
            return replace(default_template(mode), **data)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None


REPL_TEMPLATE = PromptTemplate(
    system=REPL_SYSTEM,
    user_header="Here is the puzzle: {num_train} training examples and {num_test} test input(s).",
    user_footer=(
        "Solve the puzzle in the REPL, then call SUBMIT with a list of {num_test} grid(s), one per test input."
    ),
    train_pair=(
        "Example {number} (train_inputs[{index}] -> train_outputs[{index}])\n"
        "Input ({input_shape}):\n{input}\nOutput ({output_shape}):\n{output}"
    ),
    test_input="Test input {number} (test_inputs[{index}], {input_shape}):\n{input}",
)

PROGRAM_TEMPLATE = PromptTemplate(
    system=PROGRAM_SYSTEM,
    user_header="Here is the puzzle: {num_train} training examples and {num_test} test input(s).",
    user_footer="Write `def transform(grid)` in a ```python block.",
    train_pair="Example {number}\nInput ({input_shape}):\n{input}\nOutput ({output_shape}):\n{output}",
    test_input="Test input {number} ({input_shape}):\n{input}",
)


def default_template(mode: AgentMode) -> PromptTemplate:
    _check_mode(mode, "mode")
    return REPL_TEMPLATE if mode == "repl" else PROGRAM_TEMPLATE


def load_template(template: PromptTemplate | str | Path | None, mode: AgentMode) -> PromptTemplate:
    """None -> the default of `mode`; a path -> `PromptTemplate.from_file`; a template -> itself."""
    if template is None:
        return default_template(mode)
    if isinstance(template, PromptTemplate):
        return template
    return PromptTemplate.from_file(template, mode)


def render_messages(
    task: ArcTask,
    mode: AgentMode,
    template: PromptTemplate | str | Path | None = None,
    privileged: Privileged = False,
) -> list[dict[str, str]]:
    """The initial conversation `[system, user]` for `task`.

    `privileged` (teacher prompts only): False/"none" (student prompt), "solutions" (alias "outputs": the test
    outputs), "program" (`task.metadata["reference_program"]`), "both", or True/"auto" (the program when the task has
    one, else the test outputs). The privileged block is appended at the end of the user message; nothing else
    changes.
    """
    template = load_template(template, mode)
    counts = {"num_train": str(len(task.train)), "num_test": str(len(task.test_inputs))}
    parts = [_fill(template.user_header, counts)]
    for i, pair in enumerate(task.train):
        parts.append(
            _fill(
                template.train_pair,
                {
                    "index": str(i),
                    "number": str(i + 1),
                    "input": format_grid(pair.input, template.grid_format),
                    "output": format_grid(pair.output, template.grid_format),
                    "input_shape": grid_shape(pair.input),
                    "output_shape": grid_shape(pair.output),
                },
            )
        )
    for i, grid in enumerate(task.test_inputs):
        values = {"index": str(i), "number": str(i + 1), "input": format_grid(grid, template.grid_format),
                  "input_shape": grid_shape(grid)}
        parts.append(_fill(template.test_input, values))
    parts.append(_fill(template.user_footer, counts))
    if privileged and privileged != "none":
        parts.append(_privileged_block(task, template, privileged))
    user = "\n\n".join(p for p in parts if p)
    return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]


def _privileged_block(task: ArcTask, template: PromptTemplate, privileged: Privileged) -> str:
    program = task.metadata.get("reference_program")
    if privileged is True or privileged == "auto":
        kind = "program" if program else "solutions"
    elif privileged in ("solutions", "outputs", "program", "both"):
        kind = "solutions" if privileged == "outputs" else privileged
    else:
        raise ValueError(
            f"privileged must be False, True, 'none', 'auto', 'solutions' ('outputs'), 'program' or 'both', "
            f"got {privileged!r}"
        )
    parts = [template.privileged_header]
    if kind in ("program", "both"):
        if not program:
            raise ValueError(f"task {task.id!r}: privileged={privileged!r} needs metadata['reference_program']")
        parts.append(_fill(template.privileged_program, {"program": str(program).strip()}))
    if kind in ("solutions", "both"):
        if task.test_outputs is None:
            raise ValueError(f"task {task.id!r}: privileged={privileged!r} needs the test outputs (task has none)")
        for i, grid in enumerate(task.test_outputs):
            values = {
                "index": str(i),
                "number": str(i + 1),
                "output": format_grid(grid, template.grid_format),
                "output_shape": grid_shape(grid),
            }
            parts.append(_fill(template.privileged_output, values))
    return "\n\n".join(p for p in parts if p)


def _fill(text: str, values: dict[str, Any]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def _check_mode(mode: Any, label: str) -> None:
    if mode not in AGENT_MODES:
        raise ValueError(f"{label} must be one of {list(AGENT_MODES)}, got {mode!r}")
