"""The stable model path that lets evaluations share vLLM's compile cache (arc_trl.eval.model_alias)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from arc_trl.eval.model_alias import stable_model_path


def _model(folder: Path, config: str = '{"hidden_size": 8}') -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config)
    return folder


def test_models_of_one_architecture_share_a_path_one_after_the_other(tmp_path):
    a, b = _model(tmp_path / "run-a"), _model(tmp_path / "run-b")
    root = tmp_path / "aliases"
    with contextlib.ExitStack() as stack:
        first = stable_model_path(str(a), stack, root)
        assert os.path.realpath(first) == str(a.resolve())
    with contextlib.ExitStack() as stack:
        second = stable_model_path(str(b), stack, root)
        assert second == first and os.path.realpath(second) == str(b.resolve())  # re-pointed to the new folder


def test_side_by_side_evaluations_get_different_slots_and_architectures_different_keys(tmp_path):
    a, b = _model(tmp_path / "run-a"), _model(tmp_path / "run-b")
    other = _model(tmp_path / "big", '{"hidden_size": 16}')
    root = tmp_path / "aliases"
    with contextlib.ExitStack() as one, contextlib.ExitStack() as two:
        path_a, path_b = stable_model_path(str(a), one, root), stable_model_path(str(b), two, root)
        assert path_a != path_b  # the first slot is held: a's engine keeps reading a
        assert (os.path.realpath(path_a), os.path.realpath(path_b)) == (str(a.resolve()), str(b.resolve()))
        assert path_a.endswith("-0") and path_b.endswith("-1")
        path_other = stable_model_path(str(other), two, root)
        assert Path(path_other).name.split("-")[0] != Path(path_a).name.split("-")[0]
    with contextlib.ExitStack() as stack:
        assert stable_model_path(str(b), stack, root) == path_a  # both released: slot 0 again


def test_hub_ids_and_unusable_roots_leave_the_path_as_it_is(tmp_path):
    a = _model(tmp_path / "run-a")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with contextlib.ExitStack() as stack:
        assert stable_model_path("Qwen/Qwen3-0.6B", stack, tmp_path / "aliases") == "Qwen/Qwen3-0.6B"
        assert stable_model_path(str(a), stack, blocker / "aliases") == str(a)  # OSError: the folder itself
