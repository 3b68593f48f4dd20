"""Keys a config sets without effect: one warning each, naming the key and why (not an error: a sweep shares keys
across arms); none for the defaults, nor for any config shipped under configs/ (a shipped config sets no dead key)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from arc_trl.config import ineffective_keys
from arc_trl.config import ArcConfig
from arc_trl.launch.sweep import TOP_LEVEL_KEYS, expand_sweep, load_sweep
from arc_trl.train_entry import CONFIG_CLASSES, known_keys, parse_config, parse_config_with
from arc_trl.ttrl.settings import TtrlArguments

REPO = Path(__file__).resolve().parents[3]
RULE_KEYS = tuple(key for rule in ineffective_keys.RULES for key in rule.keys)


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch, caplog):
    from arc_trl.config import warn_once

    monkeypatch.setattr(warn_once, "said", set())  # as in a new process
    caplog.set_level(logging.WARNING, logger=ineffective_keys.__name__)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == ineffective_keys.__name__]


def args(use_vllm: bool) -> SimpleNamespace:
    return SimpleNamespace(use_vllm=use_vllm, steps_per_generation=None, gradient_accumulation_steps=1)


@pytest.mark.parametrize(("key", "value", "privileged"), [
    ("peer_max_chars", 2000, "none"), ("peer_min_reward", 0.5, "solutions"),
])
def test_peer_keys_without_the_peer_teacher_warn_once_naming_the_key(caplog, key, value, privileged):
    arc = ArcConfig(teacher_privileged=privileged, **{key: value})
    arc.check_with(args(use_vllm=False))
    arc.check_with(args(use_vllm=False))  # arc-trl train's parsing, then the trainer: still one warning
    assert warnings_of(caplog) == [f"config: {key}={value!r} has no effect: it is read only with teacher_privileged: "
                                   f"peer (this config: teacher_privileged={privileged!r})"]
    caplog.clear()
    ArcConfig(teacher_privileged="peer", teacher_backend="policy", **{key: value}).check_with(args(use_vllm=False))
    assert warnings_of(caplog) == []


@pytest.mark.parametrize("key", ["vllm_rollout_dtype", "vllm_kv_cache_dtype"])
def test_fp8_without_vllm_warns_naming_the_key_and_with_vllm_does_not(caplog, key):
    ArcConfig(**{key: "fp8"}).check_with(args(use_vllm=False))  # a warning, no longer a ValueError
    [message] = warnings_of(caplog)
    assert message.startswith(f"config: {key}='fp8' has no effect: it sets the precision of the vLLM engine")
    assert "use_vllm: false" in message
    caplog.clear()
    ArcConfig(**{key: "fp8"}).check_with(args(use_vllm=True))
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(("use_vllm", "mode", "warns"), [
    (False, "colocate", True), (True, "server", True), (True, "colocate", False),
])
def test_a_fixed_kv_cache_warns_unless_a_colocated_engine_takes_it(caplog, use_vllm, mode, warns):
    ArcConfig(vllm_kv_cache_memory_gib=20.0).check_with(SimpleNamespace(**vars(args(use_vllm)), vllm_mode=mode))
    messages = warnings_of(caplog)
    assert len(messages) == warns
    if warns:
        assert messages[0].startswith("config: vllm_kv_cache_memory_gib=20.0 has no effect: it sizes a colocated vLLM")
        assert f"vllm_mode={mode!r}" in messages[0]


def test_a_key_at_its_default_is_not_set(caplog):
    ArcConfig(peer_max_chars=4000, vllm_rollout_dtype="bf16", vllm_kv_cache_dtype="auto").check_with(args(False))
    assert warnings_of(caplog) == []


def test_the_command_line_path_warns_once_per_key(caplog, tmp_path, tiny_model_dir):
    config = tmp_path / "run.yaml"
    config.write_text((REPO / "configs" / "tiny-cpu.yaml").read_text() + "\npeer_max_chars: 100\n"
                      "vllm_kv_cache_dtype: fp8\nuse_vllm: false\n")
    parse_config(["--config", str(config), "--model_name_or_path", str(tiny_model_dir)])  # a model folder there
    messages = warnings_of(caplog)
    assert [m.split("=")[0] for m in messages] == ["config: peer_max_chars", "config: vllm_kv_cache_dtype"]


def shipped_training_configs() -> dict[str, dict]:
    """Every training config under configs/: the YAML files `arc-trl train` (and `arc-trl ttrl`: its keys on top)
    reads, and each run of each sweep file. (The others, SFT and experiment profiles, set none of the keys the rules
    check: asserted below.)"""
    configs, train_keys = {}, known_keys((*CONFIG_CLASSES, TtrlArguments))
    for path in sorted((REPO / "configs").rglob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        name = str(path.relative_to(REPO))
        if isinstance(data, dict) and set(data) <= train_keys:
            configs[name] = data
        elif isinstance(data, dict) and "base_config" in data and set(data) <= set(TOP_LEVEL_KEYS):
            configs.update({f"{name}:{run.name}": run.config for run in expand_sweep(load_sweep(path))})
    return configs


def test_no_shipped_config_sets_a_key_without_effect(caplog, tmp_path):
    configs = shipped_training_configs()
    assert "configs/tiny-cpu.yaml" in configs and "configs/qwen3-8b-4gpu-server.yaml" in configs
    assert "configs/coder/ttrl-qwen05.yaml" in configs and "configs/ttrl-tiny-cpu.yaml" in configs  # arc-trl ttrl's
    assert any(":" in name for name in configs)  # the sweeps' runs too
    checked_files = {name.split(":")[0] for name in configs}
    for path in (REPO / "configs").rglob("*.yaml"):
        if str(path.relative_to(REPO)) not in checked_files:
            assert not any(key in path.read_text() for key in RULE_KEYS), f"{path}: not checked but sets a rule key"
    for name, config in configs.items():
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(config))
        # the real loading path; use_cpu: the GPU configs' bf16 needs it on this machine, and no rule reads it
        parse_config_with(["--config", str(path), "--model_name_or_path", "m", "--use_cpu", "true"],
                          extra=(TtrlArguments,))
        assert warnings_of(caplog) == [], name
