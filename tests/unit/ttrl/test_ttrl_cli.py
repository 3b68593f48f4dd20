"""`arc-trl ttrl`'s user mistakes are one line naming the file, the key or the task, before any model loads."""

from __future__ import annotations

import json

import pytest

from arc_trl.cli.main import SUBCOMMANDS
from arc_trl.cli.ttrl import run


@pytest.fixture
def config(tmp_path, tiny_model_dir):
    path = tmp_path / "ttrl.yaml"
    path.write_text(f"model_name_or_path: {tiny_model_dir}\noutput_dir: {tmp_path / 'out'}\nuse_vllm: false\n"
                    "use_cpu: true\nbf16: false\nreport_to: none\n")
    return path


@pytest.fixture
def challenges(tmp_path):
    path = tmp_path / "x_challenges.json"
    path.write_text(json.dumps({"aa01": {"train": [{"input": [[1]], "output": [[2]]}], "test": [{"input": [[3]]}]}}))
    return path


def _error(argv) -> str:
    with pytest.raises(SystemExit) as exc:
        run(argv)
    message = str(exc.value.code)
    assert "\n" not in message.strip() or message.startswith("error in") and "wrong value types" in message
    return message


def test_ttrl_is_a_subcommand():
    assert SUBCOMMANDS["ttrl"][0] == "arc_trl.cli.ttrl:main"


@pytest.mark.parametrize(("extra", "expected"), [
    (["--dataset", "missing_challenges.json"], r"error: dataset missing_challenges.json: .*neither a bundled dataset"),
    (["--task_ids", "nope"], r"error: task_ids: .*nope"),
    (["--teacher_privileged", "solutions", "--teacher_backend", "policy", "--teacher_tau", "0.1"],
     r"ttrl.yaml: teacher_privileged: 'solutions' would put the held-out pair's output"),
    (["--n_attempts", "0"], r"ttrl.yaml: n_attempts must be >= 1"),
    (["--fallback", "nothing"], r"fallback must be one of"),
    (["--adapter", "no_such_adapter"], r"ttrl.yaml: adapter no_such_adapter: no adapter_config.json"),
    (["--eval_dataset", "arc-agi-1/eval"], r"ttrl has no held-out evaluation"),
])
def test_mistakes_are_one_line_naming_what_is_wrong(config, challenges, extra, expected):
    import re

    argv = ["--config", str(config), "--dataset", str(challenges), *extra]
    assert re.search(expected, _error(argv))


def test_a_bad_config_key_or_file_is_named(config, tmp_path):
    config.write_text(config.read_text() + "n_attempt: 2\n")
    message = _error(["--config", str(config)])
    assert "ttrl.yaml: unknown config keys: 'n_attempt' (did you mean 'n_attempts'?)" in message
    assert "arc-trl ttrl --help" in message
    assert "config file nope.yaml does not exist" in _error(["--config", "nope.yaml"])
