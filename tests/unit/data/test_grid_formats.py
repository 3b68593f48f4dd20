"""Grid renderings of a prompt template (`PromptTemplate.grid_format`) and the code-model templates of configs/prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from arc_trl.data import format_grid, load_template, parse_grid, render_messages

ROOT = Path(__file__).resolve().parents[3]


def test_spaced_rows_separate_the_cells_and_parse_back():
    grid = [[8, 6, 8], [0, 0, 1]]
    assert format_grid(grid) == "868\n001"
    assert format_grid(grid, "spaced") == "8 6 8\n0 0 1"
    assert parse_grid(format_grid(grid, "spaced")) == parse_grid(format_grid(grid)) == grid
    with pytest.raises(ValueError, match=r"grid format must be one of \['digits', 'spaced'\], got 'lists'"):
        format_grid(grid, "lists")


def test_the_coder_template_writes_every_grid_spaced_and_asks_for_transform(toy_task):
    template = load_template(ROOT / "configs" / "prompts" / "coder-repl.yaml", "repl")
    system, user = render_messages(toy_task, "repl", template)
    assert template.grid_format == "spaced"
    assert "Input (2x2):\n1 2\n3 4\nOutput (2x2):\n2 1\n4 3" in user["content"]
    assert "Test input 1 (2x2):\n7 8\n9 0" in user["content"] and "0 9" not in user["content"]  # no test output
    assert user["content"].endswith("Write `transform(grid)` in a ```python block.")
    assert "`train_inputs`, `train_outputs`" in system["content"] and "submitted" in system["content"]
    digits = load_template(ROOT / "configs" / "prompts" / "coder-repl-digits.yaml", "repl")
    assert digits.system.replace("one digit per cell", "cells separated by spaces") == template.system
    assert "Input (2x2):\n12\n34" in render_messages(toy_task, "repl", digits)[1]["content"]


def test_a_template_with_an_unknown_grid_format_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("grid_format: lists\n")
    with pytest.raises(ValueError, match=r"t\.yaml: grid_format must be one of \['digits', 'spaced'\]"):
        load_template(path, "repl")
