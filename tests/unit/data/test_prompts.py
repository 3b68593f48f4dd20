import pytest

from arc_trl.data import PromptTemplate, default_template, format_grid, render_messages
from arc_trl.tasks import load_task


def grid_block(label, grid):
    h, w = len(grid), len(grid[0])
    return f"{label} ({h}x{w}):\n{format_grid(grid)}"


def assert_no_test_output(messages, task):
    for grid in task.test_outputs:
        for m in messages:
            assert format_grid(grid) not in m["content"]


def test_toy_task_exact_program_rendering(toy_task):
    messages = render_messages(toy_task, "program")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == (
        "Here is the puzzle: 2 training examples and 1 test input(s).\n\n"
        "Example 1\nInput (2x2):\n12\n34\nOutput (2x2):\n21\n43\n\n"
        "Example 2\nInput (1x3):\n506\nOutput (1x3):\n605\n\n"
        "Test input 1 (2x2):\n78\n90\n\n"
        "Write `def transform(grid)` in a ```python block."
    )
    assert "def transform(grid)" in messages[0]["content"] and "```python" in messages[0]["content"]


def test_arc1_task_repl_mode():
    task = load_task("arc-agi-1/train", "007bbfb7")
    messages = render_messages(task, "repl")
    system, user = messages[0]["content"], messages[1]["content"]
    for word in ("train_inputs", "train_outputs", "test_inputs", "`np`", "```python", "SUBMIT(list_of_grids)"):
        assert word in system
    for i, pair in enumerate(task.train):
        assert f"Example {i + 1} (train_inputs[{i}] -> train_outputs[{i}])" in user
        assert f"{grid_block('Input', pair.input)}\n{grid_block('Output', pair.output)}" in user
    assert "Test input 1 (test_inputs[0], 3x3):\n707\n707\n770" in user
    assert user.endswith("call SUBMIT with a list of 1 grid(s), one per test input.")
    assert_no_test_output(messages, task)


@pytest.mark.parametrize(
    "mode,test_label", [("repl", "Test input 2 (test_inputs[1], 11x5)"), ("program", "Test input 2 (11x5)")]
)
def test_arc2_task_with_two_test_inputs(mode, test_label):
    task = load_task("arc-agi-2/eval", "20270e3b")
    assert len(task.test_inputs) == 2
    messages = render_messages(task, mode)
    user = messages[1]["content"]
    for pair in task.train:
        assert grid_block("Input", pair.input) in user and grid_block("Output", pair.output) in user
    assert f"{test_label}:\n{format_grid(task.test_inputs[1])}" in user
    assert_no_test_output(messages, task)


def test_privileged_outputs_only_extend_the_user_message(toy_task_two_tests):
    student = render_messages(toy_task_two_tests, "repl")
    teacher = render_messages(toy_task_two_tests, "repl", privileged=True)
    assert teacher[0] == student[0]
    assert teacher[1]["content"].startswith(student[1]["content"] + "\n\nPrivileged information")
    extra = teacher[1]["content"][len(student[1]["content"]) :]
    assert "Correct output for test input 1 (2x2):\n22\n20" in extra
    assert "Correct output for test input 2 (1x1):\n3" in extra
    for alias in ("solutions", "outputs"):
        assert render_messages(toy_task_two_tests, "repl", privileged=alias) == teacher
    assert render_messages(toy_task_two_tests, "repl", privileged="none") == student


def test_privileged_program(toy_task):
    toy_task.metadata["reference_program"] = "def transform(grid):\n    return grid[:, ::-1]\n"
    auto = render_messages(toy_task, "program", privileged=True)[1]["content"]
    assert auto.endswith("```python\ndef transform(grid):\n    return grid[:, ::-1]\n```")
    assert "Correct output" not in auto
    both = render_messages(toy_task, "program", privileged="both")[1]["content"]
    assert "return grid[:, ::-1]" in both and "Correct output for test input 1 (2x2):\n87\n09" in both


def test_privileged_errors(toy_task, toy_task_hidden):
    with pytest.raises(ValueError, match="reference_program"):
        render_messages(toy_task, "repl", privileged="program")
    with pytest.raises(ValueError, match="needs the test outputs"):
        render_messages(toy_task_hidden, "repl", privileged=True)
    with pytest.raises(ValueError, match="privileged must be"):
        render_messages(toy_task, "repl", privileged="yes")
    with pytest.raises(ValueError, match="mode must be one of"):
        render_messages(toy_task, "chat")


def test_yaml_template_overrides_and_defaults(tmp_path, toy_task):
    path = tmp_path / "t.yaml"
    path.write_text(
        "mode: program\n"
        "system: 'Custom system {not a placeholder}'\n"
        'train_pair: "IN {input_shape}\\n{input}\\nOUT {output_shape}\\n{output}"\n'
    )
    template = PromptTemplate.from_file(path)
    assert template.user_footer == default_template("program").user_footer
    messages = render_messages(toy_task, "repl", template=path)  # the file's mode wins for the defaults
    assert messages[0]["content"] == "Custom system {not a placeholder}"
    assert "IN 1x3\n506\nOUT 1x3\n605" in messages[1]["content"]
    assert messages[1]["content"].endswith("Write `def transform(grid)` in a ```python block.")


def test_text_template_and_errors(tmp_path, toy_task):
    text = tmp_path / "system.txt"
    text.write_text("Only the system prompt.\n")
    assert render_messages(toy_task, "repl", template=text)[0]["content"] == "Only the system prompt."
    bad = tmp_path / "bad.yaml"
    bad.write_text("sytem: typo\n")
    with pytest.raises(ValueError, match=r"bad.yaml: unknown template field\(s\) \['sytem'\]"):
        PromptTemplate.from_file(bad)
    bad.write_text("system: [1, 2]\n")
    with pytest.raises(ValueError, match="must be strings"):
        PromptTemplate.from_file(bad)
    with pytest.raises(FileNotFoundError):
        PromptTemplate.from_file(tmp_path / "missing.yaml")
