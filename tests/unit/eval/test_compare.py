"""Metrics tables (one folder) and comparison tables (several folders, best values in bold, pass@k columns)."""

from __future__ import annotations

import json

import pytest

from arc_trl.eval.compare import compare_dirs, main as compare_main
from arc_trl.eval.tables import format_cell, metrics_table, read_metrics, write_metrics_table

BASELINE = {
    "n_tasks": 120,
    "n_attempts": 480,
    "valid_code": 1.0,
    "valid_outputs": 0.7087,
    "unique_outputs": 0.4382,
    "pixel_score": 0.4021,
    "correct_grids": 0.0171,
    "pass_rate": 0.0168,
    "is_correct": 0.2225,
}
RL = {
    **BASELINE,
    "valid_code": 0.9617,
    "valid_outputs": 0.8192,
    "unique_outputs": 0.3598,
    "pixel_score": 0.5493,
    "correct_grids": 0.0590,
    "pass_rate": 0.0582,
    "is_correct": 0.27,
    "train_pixel_score": 0.5624,
    "train_correct_grids": 0.0676,
    "train_pass_rate": 0.0460,
}


def _eval_dir(path, metrics, passes: dict[str, list[bool]] | None = None, dataset: str | None = None):
    path.mkdir(parents=True)
    (path / "metrics.json").write_text(json.dumps(metrics))
    if passes is not None:
        lines = [
            json.dumps({"task_id": t, "attempt": i, "passed": p}) for t, ps in passes.items() for i, p in enumerate(ps)
        ]
        (path / "per_attempt.jsonl").write_text("\n".join(lines) + "\n")
    if dataset is not None:
        (path / "sampling.json").write_text(json.dumps({"dataset": dataset, "n": 4}))
    return path


def _cells(table: str) -> list[list[str]]:
    """Markdown table -> rows of stripped cells (header first, separator dropped)."""
    lines = [line for line in table.strip().splitlines() if not line.startswith("|-")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def _column(table: str, header: str) -> list[str]:
    rows = _cells(table)
    j = rows[0].index(header)
    return [row[j] for row in rows[1:]]


def test_format_cell():
    assert format_cell(0.70871, percent=True) == "70.87%"
    assert format_cell(1.0, percent=True) == "100.00%"
    assert format_cell(None, percent=True) == "-"
    assert format_cell(4.0, percent=False) == "4"
    assert format_cell(4.5, percent=False) == "4.5"


def test_metrics_table_layout(tmp_path):
    _eval_dir(tmp_path / "baseline", BASELINE, dataset="arc-agi-2/eval")
    table = metrics_table(tmp_path / "baseline")
    rows = _cells(table)
    assert rows[0] == [
        "dataset", "experiment", "n_preds", "valid code", "valid outputs", "unique outputs", "train_pixel_score",
        "train_correct_grids", "train_pass_rate", "test_pixel_score", "test_correct_grids", "test_pass_rate",
        "is_correct",
    ]  # fmt: skip
    assert rows[1] == [
        "arc-agi-2/eval", "baseline", "4", "100.00%", "70.87%", "43.82%", "-", "-", "-", "40.21%", "1.71%", "1.68%",
        "22.25%",
    ]  # fmt: skip
    assert "**" not in table  # a single row has no winner
    lines = table.splitlines()
    assert lines[1].startswith("|---") and len({len(line) for line in lines}) == 1  # aligned columns


def test_write_metrics_table_saves_and_prints(tmp_path, capsys):
    folder = _eval_dir(tmp_path / "run", RL)
    table = write_metrics_table(folder, dataset="evaluation", experiment="RL all tasks")
    assert (folder / "metrics.md").read_text() == table
    assert capsys.readouterr().out == table
    assert _cells(table)[1][:3] == ["evaluation", "RL all tasks", "4"]
    assert _column(table, "train_pixel_score") == ["56.24%"]


def test_read_metrics_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.json"):
        read_metrics(tmp_path)
    (tmp_path / "metrics.json").write_text(json.dumps({"pass_rate": "high"}))
    with pytest.raises(ValueError, match=r"metrics.json: field 'pass_rate' must be a number"):
        read_metrics(tmp_path)


def test_compare_bolds_the_best_value_per_column(tmp_path):
    a = _eval_dir(tmp_path / "a", BASELINE, passes={"t1": [False, True, False, False], "t2": [False] * 4})
    b = _eval_dir(tmp_path / "b", RL, passes={"t1": [True, True, False, False], "t2": [False, False, False, True]})
    table = compare_dirs([a, b], names=["baseline", "RL all tasks"], dataset="evaluation")
    assert _column(table, "experiment") == ["baseline", "RL all tasks"]
    assert _column(table, "valid code") == ["**100.00%**", "96.17%"]
    assert _column(table, "valid outputs") == ["70.87%", "**81.92%**"]
    assert _column(table, "unique outputs") == ["**43.82%**", "35.98%"]
    assert _column(table, "is_correct") == ["22.25%", "**27.00%**"]
    # a value present in only one row is not a contest: no bold
    assert _column(table, "train_pixel_score") == ["-", "56.24%"]
    # pass@k from per_attempt.jsonl: a = (0.25 + 0)/2, b = (0.5 + 0.25)/2 at k=1
    assert _column(table, "pass@1") == ["12.50%", "**37.50%**"]
    assert _column(table, "pass@2") == ["25.00%", "**66.67%**"]
    assert _column(table, "pass@4") == ["50.00%", "**100.00%**"]


def test_compare_ties_and_different_ks(tmp_path):
    a = _eval_dir(tmp_path / "a", {**BASELINE, "pass_rate": 0.5}, passes={"t": [True, False]})
    b = _eval_dir(tmp_path / "b", {**BASELINE, "pass_rate": 0.5}, passes={"t": [True, False, False, False]})
    c = _eval_dir(tmp_path / "c", {**BASELINE, "pass_rate": 0.25})
    table = compare_dirs([a, b, c])
    assert _column(table, "experiment") == ["a", "b", "c"]
    assert _column(table, "test_pass_rate") == ["**50.00%**", "**50.00%**", "25.00%"]  # ties share the bold
    assert _column(table, "valid code") == ["100.00%"] * 3  # all equal: no winner, no bold
    assert _column(table, "pass@1") == ["**50.00%**", "25.00%", "-"]
    assert _column(table, "pass@2") == ["**100.00%**", "50.00%", "-"]
    assert _column(table, "pass@4") == ["-", "100.00%", "-"]  # only one folder reaches k=4


def test_compare_main_writes_table_and_plot(tmp_path, capsys):
    a = _eval_dir(tmp_path / "a", BASELINE, passes={"t": [True, False, False, False]})
    b = _eval_dir(tmp_path / "b", RL, passes={"t": [True, True, False, False]})
    out, plot = tmp_path / "cmp" / "table.md", tmp_path / "cmp" / "pass_at_k.png"
    code = compare_main([str(a), str(b), "--names", "baseline", "RL", "--output", str(out), "--plot", str(plot)])
    assert code == 0
    assert capsys.readouterr().out == out.read_text()
    assert _column(out.read_text(), "experiment") == ["baseline", "RL"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_rejects_wrong_number_of_names(tmp_path):
    a = _eval_dir(tmp_path / "a", BASELINE)
    with pytest.raises(ValueError, match="got 2 names for 1 folders"):
        compare_dirs([a], names=["x", "y"])


def test_compare_main_reports_unreadable_folders(tmp_path, capsys):
    assert compare_main([str(tmp_path / "missing")]) == 2
    assert "missing/metrics.json: no such file" in capsys.readouterr().err


def test_compare_warns_about_different_datasets_and_lists_gained_and_lost_tasks(tmp_path, capsys):
    long_spec = "synthetic:n=256,seed=0,difficulty=tiny,families=rotate+flip+transpose+mirror_concat+recolor"
    a = _eval_dir(tmp_path / "a", BASELINE, passes={"t1": [True, False], "t2": [False, False], "t3": [True, True]},
                  dataset="arc-agi-1/eval")
    b = _eval_dir(tmp_path / "b", RL, passes={"t1": [False, False], "t2": [False, True], "t3": [True, False]},
                  dataset=long_spec)
    assert compare_main([str(a), str(b), "--by-task"]) == 0
    captured = capsys.readouterr()
    assert "warning: the folders were scored on different datasets (a: arc-agi-1/eval, b: synthetic:" in captured.err
    assert "**" not in captured.out  # no best among rows that measure different things
    assert _column(captured.out.split("\n\n")[0], "dataset")[1] == long_spec[:39] + "…"
    assert "b vs a: 2 solved, 1 gained, 1 lost, 1 kept" in captured.out
    assert "  gained: t2" in captured.out and "  lost:   t1" in captured.out
    # the same dataset: no warning, the best values bold again
    c = _eval_dir(tmp_path / "c", RL, passes={"t1": [True, True]}, dataset="arc-agi-1/eval")
    assert compare_main([str(a), str(c)]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and "**" in captured.out
