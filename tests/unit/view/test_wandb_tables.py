"""W&B that a researcher can use, read back from an offline run's files: the episode table (grids as images, code,
output, reward parts), the evaluation folder's run, collapse-guard events; when the trainer logs them; `wandb/`
under output_dir; the no-learning-signal warning and the run's closing reading."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from eval_folder import write_eval_folder

from arc_trl.tasks import load_tasks


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))  # where the table artifacts are staged
    monkeypatch.delenv("WANDB_DIR", raising=False)
    import wandb

    if wandb.run is not None:  # a run an earlier test in this process left open (the tables need none, then ours)
        wandb.finish()
    yield tmp_path
    if wandb.run is not None:
        wandb.finish()


def _tables(root: Path, key: str) -> list[dict]:
    """The W&B tables logged under `key` in the offline runs below `root`, oldest first (the run's files copy: W&B
    writes media cells there as their type's name; the whole table, images included, is staged as an artifact)."""
    files = sorted(root.glob(f"wandb/offline-run-*/files/media/table/{key}_*.table.json"),
                   key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in files]


def _staged_tables(root: Path) -> list[dict]:
    """The tables staged for upload as artifacts (with their image cells), from WANDB_DATA_DIR."""
    out = []
    for path in (root / "wandb-data").rglob("*"):
        if path.is_file() and path.read_bytes()[:1] == b"{":
            data = json.loads(path.read_text())
            if data.get("_type") == "table":
                out.append(data)
    return out


def test_the_episode_table_lands_in_the_offline_runs_files_with_its_grids(offline):
    import wandb

    from arc_trl.view.wandb_tables import EPISODE_COLUMNS, log_episodes

    task = load_tasks("arc-agi-1/eval", ids=["00576224"])[0]
    record = {"step": 50, "task_id": task.id, "finish_reason": "submitted", "reward": 1.5, "advantage": 0.25,
              "reward_parts": {"arc_reward_barc": 1.5}, "num_turns": 2, "num_model_tokens": 80,
              "outcome": {"code_found": True, "test_predictions": task.test_inputs}, "test_outputs": task.test_outputs,
              "passed": False, "task": task.to_json(), "final_observation": "False\nSUBMIT accepted: 1 grid recorded.",
              "messages": [{"role": "assistant", "content": "```python\nprint(1)\n```"},
                           {"role": "user", "content": "1"},
                           {"role": "assistant", "content": "```python\nSUBMIT(test_inputs)\n```"}]}
    assert not log_episodes([record], 50)  # no run: nothing to log, no error
    run = wandb.init(project="arc-trl-test", dir=str(offline))
    assert log_episodes([record, {**record, "passed": True}], 50)
    run.finish()
    [table] = _tables(offline, "rollouts/episodes")
    assert table["columns"] == EPISODE_COLUMNS and len(table["data"]) == 2
    row = dict(zip(table["columns"], table["data"][0]))
    assert row["task_id"] == task.id and row["kind"] == "wrong" and row["reward"] == 1.5 and row["step"] == 50
    assert json.loads(row["reward_parts"]) == {"arc_reward_barc": 1.5}
    assert "SUBMIT(test_inputs)" in row["code"] and row["output"].endswith("False\nSUBMIT accepted: 1 grid recorded.")
    staged = next(t for t in _staged_tables(offline) if t["columns"] == EPISODE_COLUMNS)  # (W&B stages it twice)
    cells = dict(zip(staged["columns"], staged["data"][0]))
    for column in ("test_input", "submitted", "expected"):
        assert cells[column]["_type"] == "image-file" and cells[column]["format"] == "png"
    assert cells["submitted"]["width"] == 2 * 12 and cells["expected"]["width"] == 6 * 12  # 2x2 vs 6x6 grids
    assert cells["code"] == row["code"]


def test_an_evaluation_folder_as_a_wandb_run_under_the_folder(offline):
    from arc_trl.view.wandb_tables import log_eval_folder

    tasks = load_tasks("arc-agi-1/eval", ids=["00576224", "009d5c81", "00dbd492"])
    folder = write_eval_folder(offline / "eval", tasks)
    logged = log_eval_folder(folder, "arc-trl-test", tasks)
    assert Path(logged["dir"]).is_relative_to(folder / "wandb")
    [table] = _tables(folder, "eval/tasks")
    rows = {r[0]: dict(zip(table["columns"], r)) for r in table["data"]}
    assert rows[tasks[0].id]["passed"] == 1 and rows[tasks[1].id]["passed"] == 0
    staged = next(t for t in _staged_tables(offline) if "best_submitted" in t["columns"])
    assert dict(zip(staged["columns"], staged["data"][0]))["best_submitted"]["_type"] == "image-file"
    metrics = logged["metrics"]
    assert metrics["eval/pass@1"] == pytest.approx(1 / 3) and metrics["eval/kaggle"] == pytest.approx(2 / 3)
    assert metrics["eval/attempts/runtime"] == 3 and metrics["eval/attempts/solved"] == 2


def test_collapse_guard_events_are_a_table_of_what_was_not_ok(offline):
    import wandb

    from arc_trl.view.wandb_tables import EventTable

    events = EventTable()
    run = wandb.init(project="arc-trl-test", dir=str(offline))
    assert not events.add({"event": "step", "step": 1, "label": "ok"})
    assert not events.add({"event": "save", "step": 2})
    assert events.add({"event": "step", "step": 3, "label": "warn", "fired": [{"metric": "entropy"}]})
    assert events.add({"event": "collapse", "step": 4, "action": "rollback", "reasons": "entropy fell"})
    run.finish()
    table = _tables(offline, "collapse_guard/events")[-1]
    assert [r[:3] for r in table["data"]] == [[3, "step", "warn"], [4, "collapse", None]]
    assert table["data"][1][4] == "entropy fell"


def test_the_trainer_logs_a_few_episodes_every_n_steps_one_per_group_first():
    from arc_trl.trainer.wandb_episodes import WandbEpisodes

    every = WandbEpisodes(every_steps=50, count=3, group_size=4)
    assert [s for s in range(0, 151) if every.due(s)] == [0, 50, 100, 150]
    assert every.picks(8) == [0, 4, 1]  # the first episode of each group, then the others
    assert not WandbEpisodes(0, 4).due(0)  # 0: never


def test_wandb_goes_under_output_dir_unless_wandb_dir_is_set(monkeypatch, tmp_path):
    import os

    from arc_trl.trainer.wandb_episodes import default_wandb_dir

    monkeypatch.delenv("WANDB_DIR", raising=False)
    assert default_wandb_dir(SimpleNamespace(report_to=["none"], output_dir=str(tmp_path / "a"))) is None
    assert "WANDB_DIR" not in os.environ
    assert default_wandb_dir(SimpleNamespace(report_to=["wandb"], output_dir=str(tmp_path / "run"))) == \
        str(tmp_path / "run")
    assert os.environ["WANDB_DIR"] == str(tmp_path / "run")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "mine"))
    assert default_wandb_dir(SimpleNamespace(report_to="wandb", output_dir=str(tmp_path / "b"))) == \
        str(tmp_path / "mine")


def test_no_learning_signal_is_said_once_after_n_flat_steps(capsys):
    from arc_trl.trainer.learning_signal import NoLearningSignalCallback

    callback = NoLearningSignalCallback(steps=3)
    state = SimpleNamespace(global_step=0, is_world_process_zero=True)
    flat = [1.0, 1.0, 1.0, 1.0, 0.5, 1.0]
    logged = []
    for step, frac in enumerate(flat, start=1):
        state.global_step = step
        logs = {"frac_reward_zero_std": frac}
        callback.on_log(None, state, None, logs=logs)
        logged.append(logs.get("no_signal_steps"))
    assert logged == [1.0, 2.0, 3.0, 4.0, None, 1.0]
    assert callback.events == [{"step": 3, "steps": 3}]
    err = capsys.readouterr().err
    assert err.count("no learning signal for 3 steps (to step 3)") == 1


def test_the_closing_reading_names_a_floor_reward_and_flat_groups():
    from arc_trl.run_summary import format_reading, no_signal_steps

    history = [{"step": 1, "reward": -1.0, "frac_reward_zero_std": 1.0},
               {"step": 2, "reward": -1.0, "frac_reward_zero_std": 1.0}]
    summary = {"per_step_rewards": history, "no_signal_steps": no_signal_steps(history), "mean_reward": -1.0,
               "reward_last_steps": -1.0, "truncated_rate": 1.0}
    reading = format_reading(summary, "barc")
    assert reading.startswith("the reward stayed at barc's floor -1 (no code parsed in any episode)")
    assert "no learning signal in any of the 2 steps" in reading and "every episode was cut" in reading
    healthy = {"per_step_rewards": [{"frac_reward_zero_std": 0.25}], "no_signal_steps": 0, "mean_reward": 2.0,
               "reward_last_steps": 2.5, "truncated_rate": 0.1}
    assert format_reading(healthy, "barc") is None
