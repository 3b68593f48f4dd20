import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_trl.data import DIHEDRAL_NAMES, Augmentation, random_augmentation, split_task_id
from arc_trl.data.augment import compose_dihedral, dihedral

G = [[0, 1, 2], [3, 4, 5]]  # 2x3, every one of the 8 transforms maps it differently


@st.composite
def grids(draw):
    h, w = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    return [draw(st.lists(st.integers(0, 9), min_size=w, max_size=w)) for _ in range(h)]


@st.composite
def augmentations(draw):
    return Augmentation(draw(st.integers(0, 7)), tuple(draw(st.permutations(range(10)))))


def test_transforms_match_numpy():
    a = np.array(G)
    expected = [a, np.rot90(a, 1), np.rot90(a, 2), np.rot90(a, 3), np.fliplr(a), np.flipud(a), a.T, np.rot90(a, 2).T]
    assert DIHEDRAL_NAMES[1] == "rot90" and DIHEDRAL_NAMES[7] == "anti_transpose"
    for k in range(8):
        assert dihedral(G, k) == expected[k].tolist(), DIHEDRAL_NAMES[k]
    assert dihedral(G, 1) == [[2, 5], [1, 4], [0, 3]]  # counter-clockwise, like np.rot90


def test_group_laws():
    rot90 = Augmentation(1)
    four = rot90.then(rot90).then(rot90).then(rot90)
    assert four.is_identity
    assert rot90.then(rot90) == Augmentation(2)
    assert Augmentation(4).then(Augmentation(5)) == Augmentation(2)  # flip_h then flip_v = rot180
    assert Augmentation(6).then(Augmentation(6)).is_identity
    for a in range(8):  # every row of the composition table is a permutation (closure + cancellation)
        assert sorted(compose_dihedral(a, b) for b in range(8)) == list(range(8))


@settings(max_examples=150, deadline=None)
@given(grids(), augmentations())
def test_invert_undoes_apply(grid, aug):
    out = aug.apply_grid(grid)
    assert aug.invert_grid(out) == grid
    assert aug.invert([out, None]) == [grid, None]
    assert aug.inverse().inverse() == aug
    assert sorted(v for row in out for v in row) == sorted(aug.colors[v] for row in grid for v in row)


@settings(max_examples=150, deadline=None)
@given(grids(), augmentations(), augmentations())
def test_then_is_composition(grid, a, b):
    assert a.then(b).apply_grid(grid) == b.apply_grid(a.apply_grid(grid))
    assert a.then(a.inverse()).is_identity


@settings(max_examples=100, deadline=None)
@given(augmentations())
def test_string_round_trip(aug):
    assert Augmentation.from_string(aug.to_string()) == aug


def test_string_forms_and_errors():
    assert Augmentation().to_string() == ""
    assert Augmentation(2).to_string() == "d2"
    assert Augmentation(3, (0, 4, 1, 2, 3, 5, 6, 7, 8, 9)).to_string() == "d3c0412356789"
    assert Augmentation.from_string("d3c0412356789").colors[1] == 4
    for bad in ("d8", "x3", "d3c012", "d3c0012345678"):
        with pytest.raises(ValueError):
            Augmentation.from_string(bad)
    with pytest.raises(ValueError, match="permutation of 0..9"):
        Augmentation(0, (1, 1, 2, 3, 4, 5, 6, 7, 8, 9))
    with pytest.raises(ValueError, match="0..7"):
        Augmentation(8)


def test_random_augmentation_options():
    draws = [random_augmentation(random.Random(i)) for i in range(200)]
    assert all(a.colors[0] == 0 for a in draws)
    assert {a.dihedral for a in draws} == set(range(8))
    assert any(a.colors[0] != 0 for a in (random_augmentation(i, permute_background=True) for i in range(50)))
    assert all(random_augmentation(i, geometric=False).dihedral == 0 for i in range(20))
    assert random_augmentation(7, colors=False).colors == tuple(range(10))
    assert random_augmentation(5) == random_augmentation(5)


def test_apply_task_and_map_predictions_back(toy_task):
    toy_task.metadata["reference_program"] = "def transform(grid): ..."
    aug = Augmentation(1, (0, 2, 1, 3, 4, 5, 6, 7, 8, 9))  # rot90, swap colours 1 and 2
    augmented = aug.apply_task(toy_task)
    assert augmented.id == "toy_mirror|d1c0213456789"
    assert augmented.metadata == {"original_id": "toy_mirror", "augmentation": "d1c0213456789"}
    assert toy_task.metadata["reference_program"]  # the original task is untouched
    # train pair 0 input [[1,2],[3,4]]: rot90 -> [[2,4],[1,3]], then swap 1<->2 -> [[1,4],[2,3]]
    assert augmented.train[0].input == [[1, 4], [2, 3]]
    assert augmented.test_outputs == [aug.apply_grid(toy_task.test_outputs[0])]
    # predictions made on the augmented task map back to the original solution
    original_id, recovered = split_task_id(augmented.id)
    assert original_id == "toy_mirror" and recovered == aug
    assert recovered.invert(augmented.test_outputs) == toy_task.test_outputs
    assert recovered.invert([[[1, 12]], "junk", None]) == [None, None, None]


def test_augmenting_twice_composes_and_identity_keeps_id(toy_task):
    twice = Augmentation(1).apply_task(Augmentation(1).apply_task(toy_task))
    assert twice.id == "toy_mirror|d2" and twice.metadata["augmentation"] == "d2"
    assert twice.train == Augmentation(2).apply_task(toy_task).train
    back = Augmentation(2).apply_task(twice)
    assert back.id == "toy_mirror" and back.metadata == {} and back.train == toy_task.train
    assert split_task_id("007bbfb7") == ("007bbfb7", Augmentation())
