"""Voting, Kaggle submission building, the submission validator and Kaggle scoring."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arc_trl.data.augment import Augmentation
from arc_trl.data.loaders import save_kaggle
from arc_trl.tasks import load_tasks
from arc_trl.eval.submission import (
    build_submission,
    main as submit_main,
    make_submission,
    score_submission,
    submission_problems,
    validate_main,
)
from arc_trl.eval.voting import rank_predictions, vote, vote_task

A, B, C = [[1, 2], [3, 4]], [[5]], [[6, 6, 6]]


def _record(task_id, attempt, *predictions, **extra):
    return {"task_id": task_id, "attempt": attempt, "test_predictions": list(predictions), **extra}


# --------------------------------------------------------------------------------------------------------- voting


def test_majority_wins():
    assert rank_predictions([A, B, B, None, C, B]) == [(B, 3), (A, 1), (C, 1)]


def test_ties_are_broken_by_first_occurrence():
    assert rank_predictions([C, A, B, A, C, B]) == [(C, 2), (A, 2), (B, 2)]


def test_attempt_index_decides_first_occurrence_not_file_order():
    records = [_record("t", 1, A), _record("t", 0, B)]
    assert vote_task(records, n_test=1) == [[(B, 1), (A, 1)]]


def test_invalid_predictions_cast_no_vote():
    invalid = [
        None, [[1.0]], [[10]], [[-1]], [[1, 2], [3]], "12", [[True]], [], [[]], [[0]] * 31, [[0] * 31], {"a": 1}, 7,
    ]  # fmt: skip
    ranking = rank_predictions([*invalid, A, np.array(A)])
    assert ranking == [(A, 2)]  # a numpy int array is a valid vote, pooled with the equal list
    assert all(type(v) is int for row in ranking[0][0] for v in row)


def test_votes_are_counted_per_test_input():
    records = [_record("t", 0, A, B), _record("t", 1, A, C), _record("t", 2, None, C), _record("t", 3, B)]
    assert vote(records) == {"t": [[(A, 2), (B, 1)], [(C, 2), (B, 1)]]}


def test_augmented_predictions_are_mapped_back_before_voting():
    solution = [[1, 2, 3], [0, 0, 4]]
    augmentations = [Augmentation(1, (0, 4, 1, 2, 3, 5, 6, 7, 8, 9)), Augmentation(6), Augmentation(3)]
    records = [
        _record("t", i, aug.apply_grid(solution), augmentation=aug.to_string()) for i, aug in enumerate(augmentations)
    ]
    assert records[0]["test_predictions"][0] != solution
    # the same augmentation expressed in the task id instead of a field; its votes go to the original task
    records.append(_record(f"t|{augmentations[2].to_string()}", 3, augmentations[2].apply_grid(solution)))
    records.append(_record("t", 4, [[7]]))
    assert vote(records) == {"t": [[(solution, 4), ([[7]], 1)]]}


def test_custom_inverter_is_used():
    records = [_record("t", 0, [[1, 2]], augmentation="mine"), _record("t", 1, [[2, 1]])]
    calls = []

    def reverse_rows(grid, augmentation):
        calls.append(augmentation)
        return [row[::-1] for row in grid]

    assert vote(records, invert=reverse_rows) == {"t": [[([[2, 1]], 2)]]}
    assert calls == ["mine"]


def test_bad_augmentation_string_names_the_attempt():
    with pytest.raises(ValueError, match=r"task 't' attempt 5 test 0: cannot invert augmentation 'zz'"):
        vote([_record("t", 5, A, augmentation="zz")])


# --------------------------------------------------------------------------------------------------------- building


def test_build_submission_ranks_attempts_and_falls_back(toy_task, toy_task_two_tests):
    tasks = [toy_task, toy_task_two_tests]  # toy_mirror: 1 test input; toy_identity: 2 test inputs
    records = [
        _record("toy_identity", 0, A, B),
        _record("toy_identity", 1, C, B),
        _record("toy_identity", 2, C),
        _record("unknown_task", 0, A),
    ]
    submission, summary = build_submission(records, tasks)
    assert submission == {
        "toy_mirror": [{"attempt_1": [[0]], "attempt_2": [[0]]}],
        "toy_identity": [{"attempt_1": C, "attempt_2": A}, {"attempt_1": B, "attempt_2": [[0]]}],
    }
    assert (summary.n_tasks, summary.n_test_inputs, summary.n_attempt_1_voted, summary.n_attempt_2_voted) == (
        2, 3, 2, 1,
    )  # fmt: skip
    assert summary.unknown_task_ids == ["unknown_task"]
    with_input, _ = build_submission(records, tasks, fallback="input")
    assert with_input["toy_mirror"] == [{"attempt_1": toy_task.test_inputs[0], "attempt_2": toy_task.test_inputs[0]}]
    with pytest.raises(ValueError, match="unknown fallback 'ones'"):
        build_submission(records, tasks, fallback="ones")


def _wrong(grid):
    return [[(grid[0][0] + 1) % 10] + grid[0][1:]] + grid[1:]


def test_full_arc_agi_2_eval_submission_with_sparse_predictions(tmp_path, capsys):
    tasks = load_tasks("arc-agi-2/eval")
    assert len(tasks) == 120
    challenges, solutions = save_kaggle(tasks, tmp_path / "arc-agi_evaluation_challenges.json")
    assert solutions is not None and solutions.is_file()
    records = []
    for t in tasks[:4]:  # right answer voted twice, a wrong one once: attempt_1 is right
        records += [_record(t.id, 0, *t.test_outputs), _record(t.id, 1, *map(_wrong, t.test_outputs))]
        records += [_record(t.id, 2, *t.test_outputs)]
    for t in tasks[4:6]:  # wrong answer voted twice, right answer once: attempt_2 is right
        records += [_record(t.id, i, *map(_wrong, t.test_outputs)) for i in range(2)]
        records += [_record(t.id, 2, *t.test_outputs)]
    for t in tasks[6:10]:  # nothing valid
        records += [_record(t.id, 0, None, [[12]], [[0.5]]), {"task_id": t.id, "attempt": 1, "test_predictions": None}]
    records.append(_record("not_in_eval", 0, A))

    out = tmp_path / "submission.json"
    submission = make_submission(records, challenges, out)
    assert json.loads(out.read_text()) == submission
    assert set(submission) == {t.id for t in tasks}
    assert all(len(submission[t.id]) == len(t.test_inputs) for t in tasks)
    assert submission[tasks[0].id][0]["attempt_1"] == tasks[0].test_outputs[0]
    assert submission[tasks[4].id][0]["attempt_2"] == tasks[4].test_outputs[0]
    assert submission[tasks[7].id][0] == {"attempt_1": [[0]], "attempt_2": [[0]]}

    assert validate_main(["--submission", str(out), "--challenges", str(challenges)]) == 0
    printed = capsys.readouterr().out
    assert "valid: " in printed and "covers all 120 tasks" in printed
    assert f"score: {6 / 120:.4f}" in printed  # 6 tasks fully right; sibling solutions file found automatically
    assert validate_main(["--submission", str(out), "--challenges", "arc-agi-2/eval"]) == 0  # bundled name
    assert f"score: {6 / 120:.4f}" in capsys.readouterr().out


def test_submit_cli_writes_submission_beside_per_attempt(tmp_path, capsys, toy_task, toy_task_two_tests):
    challenges, _ = save_kaggle([toy_task, toy_task_two_tests], tmp_path / "toy_challenges.json")
    eval_dir = tmp_path / "eval"
    eval_dir.mkdir()
    lines = [_record("toy_mirror", 0, toy_task.test_outputs[0]), _record("toy_identity", 0, B, B)]
    (eval_dir / "per_attempt.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    assert submit_main(["--per-attempt", str(eval_dir), "--challenges", str(challenges)]) == 0
    submission = json.loads((eval_dir / "submission.json").read_text())
    assert submission["toy_mirror"][0]["attempt_1"] == toy_task.test_outputs[0]
    printed = capsys.readouterr().out
    assert "2 tasks, 3 test inputs: attempt_1 predicted for 3" in printed
    assert "score: 50.00% over 2 tasks (1/3 test inputs correct)" in printed  # mirror 1/1, identity 0/2


def test_submit_cli_reports_unreadable_inputs(tmp_path, capsys, toy_task):
    challenges, _ = save_kaggle([toy_task], tmp_path / "toy_challenges.json")
    assert submit_main(["--per-attempt", str(tmp_path), "--challenges", str(challenges)]) == 2
    assert "per_attempt.jsonl: no such file" in capsys.readouterr().err
    (tmp_path / "per_attempt.jsonl").write_text(json.dumps(_record("toy_mirror", 0, A)) + "\n")
    assert submit_main(["--per-attempt", str(tmp_path), "--challenges", str(tmp_path / "no_challenges.json")]) == 2
    assert "no_challenges.json" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------------- validation


@pytest.fixture
def toy_challenges(tmp_path, toy_task, toy_task_two_tests):
    """Kaggle challenges + sibling solutions for toy_mirror (1 test input) and toy_identity (2 test inputs)."""
    challenges, _ = save_kaggle([toy_task, toy_task_two_tests], tmp_path / "toy_challenges.json")
    return challenges


def _valid_submission():
    return {
        "toy_mirror": [{"attempt_1": [[1]], "attempt_2": [[2]]}],
        "toy_identity": [{"attempt_1": [[1]], "attempt_2": [[2]]}, {"attempt_1": [[3]], "attempt_2": [[4]]}],
    }


def _set(task, index, key, value):
    def mutate(sub):
        sub[task][index][key] = value

    return mutate


def _delete(task, index=None, key=None):
    def mutate(sub):
        if index is None:
            del sub[task]
        else:
            del sub[task][index][key]

    return mutate


BROKEN = {
    "missing_task": (_delete("toy_mirror"), "task 'toy_mirror': missing from the submission"),
    "extra_task": (lambda s: s.update(zzz=s["toy_mirror"]), "task 'zzz': not in the challenges file"),
    "too_few_entries": (
        lambda s: s["toy_identity"].pop(),
        "task 'toy_identity': has 1 test entries, the challenges have 2 test inputs",
    ),
    "too_many_entries": (
        lambda s: s["toy_mirror"].append(s["toy_mirror"][0]),
        "task 'toy_mirror': has 2 test entries, the challenges have 1 test inputs",
    ),
    "task_not_a_list": (
        lambda s: s.update(toy_mirror=s["toy_mirror"][0]),
        "task 'toy_mirror': expected a list of 1 test entries, got dict",
    ),
    "entry_not_an_object": (
        lambda s: s["toy_identity"].__setitem__(1, [[1]]),
        "task 'toy_identity' test 1: expected an object with attempt_1 and attempt_2, got list",
    ),
    "missing_attempt_1": (_delete("toy_identity", 1, "attempt_1"), "task 'toy_identity' test 1: missing 'attempt_1'"),
    "missing_attempt_2": (_delete("toy_mirror", 0, "attempt_2"), "task 'toy_mirror' test 0: missing 'attempt_2'"),
    "non_rectangular": (
        _set("toy_identity", 1, "attempt_2", [[1, 2], [3]]),
        "task 'toy_identity' test 1 attempt_2: grid is not rectangular",
    ),
    "non_int": (_set("toy_mirror", 0, "attempt_1", [["1"]]), "task 'toy_mirror' test 0 attempt_1: cell (0,0) is '1'"),
    "bool": (_set("toy_mirror", 0, "attempt_1", [[True]]), "cell (0,0) is True, not an integer colour"),
    "numpy_float": (
        _set("toy_mirror", 0, "attempt_1", [[0, np.float64(3.0)]]),  # np.float64 is a float: JSON writes 3.0
        "task 'toy_mirror' test 0 attempt_1: cell (0,1) is 3.0, not an integer colour",
    ),
    "colour_too_big": (_set("toy_mirror", 0, "attempt_2", [[10]]), "cell (0,0) has colour 10 outside 0..9"),
    "colour_negative": (_set("toy_mirror", 0, "attempt_2", [[-1]]), "cell (0,0) has colour -1 outside 0..9"),
    "empty_grid": (_set("toy_mirror", 0, "attempt_1", []), "grid must be a non-empty list of rows"),
    "empty_row": (_set("toy_mirror", 0, "attempt_1", [[]]), "row 0 must be a non-empty list"),
    "too_many_rows": (_set("toy_mirror", 0, "attempt_1", [[0]] * 31), "grid has 31 rows (max 30)"),
    "too_many_columns": (_set("toy_mirror", 0, "attempt_1", [[0] * 31]), "grid has 31 columns (max 30)"),
    "null_grid": (_set("toy_mirror", 0, "attempt_1", None), "attempt_1: grid must be a list of rows, got NoneType"),
    "row_not_a_list": (_set("toy_mirror", 0, "attempt_1", [1, 2]), "attempt_1: row 0 must be a list, got int"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_validator_reports_each_kind_of_error(kind, tmp_path, toy_challenges, capsys):
    mutate, message = BROKEN[kind]
    submission = _valid_submission()
    mutate(submission)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(submission))
    assert validate_main(["--submission", str(path), "--challenges", str(toy_challenges)]) == 1
    printed = capsys.readouterr().out
    assert message in printed
    assert "INVALID:" in printed


def test_valid_submission_passes(tmp_path, toy_challenges, capsys):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(_valid_submission()))
    assert validate_main(["--submission", str(path), "--challenges", str(toy_challenges)]) == 0
    assert "valid: " in capsys.readouterr().out


def test_validator_prints_every_problem(tmp_path, toy_challenges, capsys):
    submission = _valid_submission()
    submission["toy_identity"][0]["attempt_1"] = [[11]]
    submission["toy_identity"][1]["attempt_2"] = [[1.5]]
    del submission["toy_mirror"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(submission))
    assert validate_main(["--submission", str(path), "--challenges", str(toy_challenges)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "task 'toy_mirror': missing from the submission",
        "task 'toy_identity' test 0 attempt_1: cell (0,0) has colour 11 outside 0..9",
        "task 'toy_identity' test 1 attempt_2: cell (0,0) is 1.5, not an integer colour",
    ]
    assert lines[3].startswith("INVALID: 3 problems")


def test_validator_rejects_a_submission_that_is_not_an_object(tmp_path, toy_challenges, capsys):
    path = tmp_path / "list.json"
    path.write_text(json.dumps([_valid_submission()]))
    assert validate_main(["--submission", str(path), "--challenges", str(toy_challenges)]) == 1
    assert "submission must be an object mapping task ids to lists of test entries, got list" in capsys.readouterr().out


def test_validator_rejects_a_non_object_and_in_memory_numpy():
    tasks = {"t": 1}
    assert submission_problems([], tasks) == [
        "submission must be an object mapping task ids to lists of test entries, got list"
    ]
    problems = submission_problems({"t": [{"attempt_1": np.array([[1]]), "attempt_2": [[np.int64(1)]]}]}, tasks)
    assert problems == [
        "task 't' test 0 attempt_1: grid must be a list of rows, got ndarray",
        "task 't' test 0 attempt_2: cell (0,0) is np.int64(1), not an integer colour",
    ]


def test_validator_unreadable_inputs_exit_2(tmp_path, toy_challenges, capsys):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    assert validate_main(["--submission", str(path), "--challenges", str(toy_challenges)]) == 2
    assert "submission file is not valid JSON" in capsys.readouterr().out
    assert validate_main(["--submission", str(path), "--challenges", str(tmp_path / "nope_challenges.json")]) == 2
    assert "nope_challenges.json" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------------------- scoring


def test_score_hand_made_case():
    solutions = {"two": [[[1, 2]], [[3]]], "one": [[[4]]], "absent": [[[5]]]}
    submission = {
        "two": [{"attempt_1": [[9, 9]], "attempt_2": [[1, 2]]}, {"attempt_1": [[4]], "attempt_2": [[3.0]]}],
        "one": [{"attempt_1": [[4]], "attempt_2": [[0]]}],
    }
    result = score_submission(submission, solutions)
    # two: test 0 right via attempt_2, test 1 wrong (3.0 is not a valid colour) -> 0.5; one -> 1; absent -> 0
    assert result.task_scores == {"two": 0.5, "one": 1.0, "absent": 0.0}
    assert result.score == pytest.approx(0.5)
    assert (result.n_correct, result.n_test_inputs) == (2, 4)


def test_validator_scores_with_explicit_and_sibling_solutions(tmp_path, toy_task, toy_task_two_tests, capsys):
    submission = {
        "toy_mirror": [{"attempt_1": [[0]], "attempt_2": toy_task.test_outputs[0]}],
        "toy_identity": [
            {"attempt_1": toy_task_two_tests.test_outputs[0], "attempt_2": [[0]]},
            {"attempt_1": [[1]], "attempt_2": [[2]]},
        ],
    }
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(submission))
    challenges, solutions = save_kaggle([toy_task, toy_task_two_tests], tmp_path / "toy_challenges.json")
    assert validate_main(["--submission", str(path), "--challenges", str(challenges)]) == 0
    assert "score: 0.7500 = 75.00% over 2 tasks; 2/3 test inputs correct" in capsys.readouterr().out
    # a challenges file without the Kaggle name, solutions given explicitly
    renamed = tmp_path / "tasks.json"
    renamed.write_text(challenges.read_text())
    argv = ["--submission", str(path), "--challenges", str(renamed), "--solutions", str(solutions)]
    assert validate_main(argv) == 0
    assert "score: 0.7500" in capsys.readouterr().out
    assert validate_main(["--submission", str(path), "--challenges", str(renamed)]) == 0
    assert "score:" not in capsys.readouterr().out  # no solutions known: validation only
