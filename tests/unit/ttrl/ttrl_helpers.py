"""The ttrl tests' helpers: a task whose every training output is a grid found nowhere else, run contexts, a clock."""

from __future__ import annotations

from arc_trl.data.task import ArcTask, Pair

# every row of every output occurs in no other grid of the task, so an output in a text is unambiguous
OUTPUTS = [[[7, 3, 9], [1, 8, 2], [6, 4, 5]], [[5, 9, 7], [2, 6, 3], [8, 1, 4]], [[4, 7, 1], [9, 2, 6], [3, 5, 8]]]
INPUTS = [[[1, 1, 2], [3, 0, 3], [1, 3, 2]], [[0, 0, 1], [0, 1, 0], [1, 0, 0]], [[2, 0, 2], [0, 2, 0], [2, 0, 2]]]


def make_leak_task() -> ArcTask:
    """Three training pairs with unique outputs, one test input, no test output (a Kaggle task)."""
    return ArcTask("leak0001", [Pair(i, o) for i, o in zip(INPUTS, OUTPUTS)], [[[3, 3, 3], [0, 0, 0], [3, 3, 3]]],
                   None, "conftest")


def grid_texts(grid) -> list[str]:
    """The ways a grid is written in a prompt (the digit rows) or printed from Python (a list repr)."""
    return ["\n".join("".join(map(str, row)) for row in grid), *("".join(map(str, row)) for row in grid), str(grid)]


def run_context(tokenizer, model: str = "unused", script: dict | None = None, arc: dict | None = None,
                args: dict | None = None, ttrl: dict | None = None, **kwargs):
    """A `RunContext` of real config objects (defaults: one-turn REPL episodes of 16 tokens, 2 x 2 per step)."""
    from trl import GRPOConfig

    from arc_trl.config import ArcConfig
    from arc_trl.config.script_args import ArcScriptArguments
    from arc_trl.ttrl.adapt import RunContext
    from arc_trl.ttrl.settings import TtrlArguments

    grpo = dict(output_dir="unused", per_device_train_batch_size=4, num_generations=2, max_completion_length=16,
                max_steps=1, use_cpu=True, bf16=False, report_to=[], beta=0.0, logging_steps=1, save_strategy="no",
                disable_tqdm=True, seed=0)
    return RunContext(model=model, tokenizer=tokenizer, script=ArcScriptArguments(**(script or {})),
                      arc=ArcConfig(**{"max_turns": 1, "max_tokens_per_turn": 16, "sandbox_workers": 1, **(arc or {})}),
                      args=GRPOConfig(**{**grpo, **(args or {})}), ttrl=TtrlArguments(**{"n_attempts": 2, **(ttrl or {})}),
                      **kwargs)


class FakeClock:
    """A clock that moves only when told to (`advance`), or by `step` at every reading."""

    def __init__(self, step: float = 0.0) -> None:
        self.now, self.step = 1000.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
