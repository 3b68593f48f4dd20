"""The held-out output of a leave-one-out episode never reaches the model, the sandbox or the teacher.

The task's three training outputs are grids found nowhere else (ttrl_helpers.OUTPUTS). Each check is shown to be able
to fail by its sanity half: what *is* shown (the other pairs' outputs, the held-out input) is found by the same
search. The teacher's requests are checked in tests/unit/ttrl/test_ttrl_adapt.py (a real GRPO step)."""

from __future__ import annotations

import json

import pytest
from ttrl_helpers import INPUTS, OUTPUTS, grid_texts, run_context

from arc_trl.chat_template import prompt_ids
from arc_trl.rollout import RolloutSettings, run_episodes, task_from_row
from arc_trl.ttrl.adapt import AdaptingRunner
from arc_trl.ttrl.leave_one_out import leave_one_out_tasks
from arc_trl.ttrl.settings import ttrl_config_problems

PROBE = '''```python
import os
import numpy as np
HELD, HELD_INPUT = {held!r}, {held_input!r}

def same(value, grid):
    try:
        a = np.asarray(value)
        return a.shape == np.asarray(grid).shape and bool((a == np.asarray(grid)).all())
    except Exception:
        return False

def walk(value, depth=0):
    yield value
    if depth > 4:
        return
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, (list, tuple)):
        children = list(value)
    elif callable(value):
        children = [c.cell_contents for c in (getattr(value, "__closure__", None) or ())]
        children += list(getattr(value, "__defaults__", None) or ())
        children += [getattr(value, "__globals__", {{}})] if getattr(value, "__module__", "") != "__main__" else []
    else:
        children = []
    for child in children:
        yield from walk(child, depth + 1)

found, input_seen = [], False
for name, value in list(globals().items()):
    if name in ("HELD", "HELD_INPUT", "same", "walk"):
        continue
    for v in walk(value):
        found += [name] if same(v, HELD) else []
        input_seen = input_seen or same(v, HELD_INPUT)
digits = "".join(str(c) for row in HELD for c in row)
try:
    for root, _, files in os.walk("."):
        for f in files:
            try:
                text = open(os.path.join(root, f)).read()
            except Exception:
                continue
            found += [f] if digits in "".join(ch for ch in text if ch.isdigit()) else []
    files_note = "files read"
except Exception as e:
    files_note = "files refused: " + type(e).__name__
print("LEAK" if found else "CLEAN", found, "INPUT_SEEN" if input_seen else "INPUT_MISSING", files_note)
```'''


class ProbeGenerator:
    """A policy whose every turn is `text` (then end of turn)."""

    def __init__(self, tokenizer, texts: list[str]) -> None:
        self.tokenizer, self.texts = tokenizer, texts
        self.eos_token_ids = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
        self.requests: list[list[int]] = []

    def generate(self, sequences, max_tokens, keys=None):
        self.requests += [list(s) for s in sequences]
        keys = range(len(sequences)) if keys is None else keys
        out = [self.tokenizer(self.texts[k], add_special_tokens=False)["input_ids"] + self.eos_token_ids for k in keys]
        return out, [[0.0] * len(ids) for ids in out]

    def global_any(self, flag):
        return flag


@pytest.fixture
def loo_rows(leak_task, tiny_tokenizer):
    return AdaptingRunner(run_context(tiny_tokenizer)).rows(leave_one_out_tasks(leak_task), augment=True)


def test_no_prompt_token_string_holds_the_held_out_output(loo_rows, tiny_tokenizer):
    for k, row in enumerate(loo_rows):
        ids = prompt_ids(tiny_tokenizer, row["prompt"])
        text = tiny_tokenizer.decode(ids)
        tokens = "".join(tiny_tokenizer.convert_ids_to_tokens(ids))
        assert not any(t in text or t in tokens for t in grid_texts(OUTPUTS[k])), f"episode {k}: output in prompt"
        assert all(grid_texts(OUTPUTS[i])[0] in text for i in range(3) if i != k)  # the shown outputs are found
        assert grid_texts(INPUTS[k])[0] in text


def test_the_sandbox_gives_model_code_no_variable_or_file_holding_it(loo_rows, tiny_tokenizer, pool):
    """Model code that searches every global (and functions' closures and defaults) and every file of its working
    folder for the held-out output finds it nowhere, though the same search finds the held-out input."""
    tasks = [task_from_row(row) for row in loo_rows]
    assert [t.test_outputs for t in tasks] == [[o] for o in OUTPUTS]  # the reward's target: held by the trainer
    texts = [PROBE.format(held=OUTPUTS[k], held_input=INPUTS[k]) for k in range(3)]
    generator = ProbeGenerator(tiny_tokenizer, texts)
    episodes = run_episodes(tasks, [row["prompt"] for row in loo_rows], generator, tiny_tokenizer, pool,
                            RolloutSettings("repl", max_turns=1, max_completion_length=4096))
    for k, (task, ep) in enumerate(zip(tasks, episodes)):
        session = pool.new_session(task)  # what leaves the trainer for the sandbox process: its setup message
        try:
            assert not any(t in json.dumps(session._setup) for t in grid_texts(OUTPUTS[k])), f"episode {k}: setup"
            assert str(INPUTS[k]) in json.dumps(session._setup)
        finally:
            session.close()
        reply = ep.final_observation or ""
        assert "CLEAN [] INPUT_SEEN" in reply, f"episode {k}: {reply[:600]}"
        assert not any(t in tiny_tokenizer.decode(ep.prompt_ids) for t in grid_texts(OUTPUTS[k]))


@pytest.mark.parametrize("privileged", ["solutions", "program"])
def test_ttrl_refuses_a_teacher_prompt_that_would_carry_test_outputs(privileged, tiny_tokenizer):
    context = run_context(tiny_tokenizer, arc={"teacher_privileged": privileged, "teacher_backend": "policy",
                                               "teacher_tau": 0.1})
    [problem] = ttrl_config_problems(context.script, context.arc)
    assert problem.startswith(f"teacher_privileged: {privileged!r} would put the held-out pair's output")
    for allowed in ("none", "peer"):
        context.arc.teacher_privileged = allowed
        assert ttrl_config_problems(context.script, context.arc) == []
