"""A fabricated evaluation folder, in the files `arc-trl evaluate generate` writes (completions.jsonl, per_attempt.jsonl,
metrics.json, pass_at_k.json), scored with the real per-attempt scoring (`score_attempt`) but without the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

from arc_trl.data.task import ArcTask
from arc_trl.rewards.outcome import AttemptOutcome

HOSTILE = ('<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
           '</textarea></template></pre><b onmouseover="window.__pwned=3">bold?</b>')


def attempt_messages(task: ArcTask, code: str, output: str, prose: str = "Let me look.") -> list[dict]:
    return [{"role": "system", "content": "You solve ARC tasks."},
            {"role": "user", "content": f"Task {task.id}: the grids ..."},
            {"role": "assistant", "content": f"{prose}\n```python\n{code}\n```"},
            {"role": "user", "content": output},
            {"role": "assistant", "content": "```python\nSUBMIT(transform(test_inputs[0]))\n```"}]


def write_eval_folder(folder: Path, tasks: list[ArcTask], n_attempts: int = 2, dataset: str = "arc-agi-1/eval",
                      hostile_task: str | None = None) -> Path:
    """Attempt 0 of every other task submits the expected grids; the others submit the test input (wrong) or nothing.
    `hostile_task`: that task's attempts carry hostile text (HOSTILE, a 20,000-character line) in every field."""
    from arc_trl.eval.passk import write_pass_at_k
    from arc_trl.eval.score import score_attempt

    folder.mkdir(parents=True, exist_ok=True)
    completions, rows = [], []
    for t, task in enumerate(tasks):
        for a in range(n_attempts):
            solved = a == 0 and t % 2 == 0
            if solved:
                predictions = [list(map(list, g)) for g in task.test_outputs]
            elif a == 1:
                predictions = None
            else:
                predictions = [list(map(list, g)) for g in task.test_inputs]
            code = "def transform(x):\n    return x  # identity\nprint(transform(train_inputs[0]).shape)"
            output = "(3, 3)\nTraceback (most recent call last):\nNameError: name 'np' is not defined" \
                if predictions is None else "(3, 3)"
            if task.id == hostile_task:
                code = f"print({HOSTILE!r})\n" + "x = 1  # " + "A" * 20_000
                output = HOSTILE + "\n" + "B" * 20_000
            outcome = AttemptOutcome(code_found=True, code_parsed=True, test_predictions=predictions,
                                     submitted=predictions is not None, num_turns=2,
                                     error_kind=None if predictions is not None else "NameError")
            messages = attempt_messages(task, code, output, prose=HOSTILE if task.id == hostile_task else "Let me look.")
            completions.append({
                "task_id": task.id, "attempt": a, "completion": "\n\n".join(m["content"] for m in messages[2::2]),
                "finish_reason": "submitted" if predictions is not None else "max_turns", "num_turns": 2,
                "num_model_tokens": 40 + a, "outcome": outcome.to_dict(), "messages": messages,
                "final_observation": ("SUBMIT accepted: 1 grid recorded." if task.id != hostile_task else HOSTILE)
                if predictions is not None else "NameError: name 'transform' is not defined",
            })
            rows.append({"task_id": task.id, "attempt": a, "line": len(rows) + 1, **score_attempt(task, outcome)})
    (folder / "completions.jsonl").write_text("".join(json.dumps(c) + "\n" for c in completions))
    (folder / "per_attempt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    solved = sum(1 for t in range(len(tasks)) if t % 2 == 0)
    (folder / "metrics.json").write_text(json.dumps({
        "dataset": dataset, "n_tasks": len(tasks), "n_attempts": len(rows), "n_tasks_with_solutions": len(tasks),
        "n_dataset_tasks": len(tasks), "n_dataset_tasks_with_solutions": len(tasks), "is_correct": solved / len(tasks),
    }))
    write_pass_at_k(folder, plot=False)
    return folder
