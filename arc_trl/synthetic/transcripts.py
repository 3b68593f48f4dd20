"""Reference transcripts of synthetic tasks, for SFT warm starts.

- program mode: `program_completion(task)`, one assistant message: the train shapes, the rule in one sentence and
  the reference program in a ```python block.
- REPL mode: `repl_turns(task)`, the assistant messages of a correct episode. Turn 1 prints the shapes and colours
  of the train pairs; turn 2 states the rule, defines `transform`, prints whether it reproduces every train pair and
  submits its predictions. The sandbox replies between turns are produced by replaying the turns in the sandbox.
"""

from __future__ import annotations

from typing import Any

from arc_trl.data.grid_format import grid_shape
from arc_trl.data.task import ArcTask
from arc_trl.synthetic.family import get_family

REPL_INSPECT = """Let me compare the shapes and colours of the train pairs.
```python
for x, y in zip(train_inputs, train_outputs):
    print(x.shape, y.shape, np.unique(x), np.unique(y))
```"""

REPL_CHECK_AND_SUBMIT = """print(all(np.array_equal(transform(x), y) for x, y in zip(train_inputs, train_outputs)))
SUBMIT([transform(x) for x in test_inputs])"""


def program_completion(task: ArcTask) -> str:
    """The program-mode answer: shapes, rule, and the reference program in a ```python block."""
    meta = _synthetic_metadata(task)
    shapes = ", ".join(f"{grid_shape(p.input)} -> {grid_shape(p.output)}" for p in task.train)
    program = meta["reference_program"].strip()
    return f"Train shapes: {shapes}.\n{_rule(task, meta)}\n\n```python\n{program}\n```"


def repl_turns(task: ArcTask) -> list[str]:
    """The assistant messages of a correct REPL episode (inspect, then define + check + SUBMIT)."""
    meta = _synthetic_metadata(task)
    program = meta["reference_program"].strip()
    solve = f"{_rule(task, meta)} I check it on the train pairs and submit.\n```python\n{program}\n\n\n"
    return [REPL_INSPECT, solve + REPL_CHECK_AND_SUBMIT + "\n```"]


def _synthetic_metadata(task: ArcTask) -> dict[str, Any]:
    missing = [key for key in ("family", "params", "reference_program") if key not in task.metadata]
    if missing:
        raise ValueError(
            f"task {task.id!r} has no {', '.join(missing)} in its metadata; transcripts need a synthetic task "
            "(arc_trl.synthetic.generate_task or load_synthetic; augmented tasks lose their reference_program)"
        )
    return task.metadata


def _rule(task: ArcTask, meta: dict[str, Any]) -> str:
    return get_family(meta["family"]).describe(meta["params"])
