"""Every default that several places use is written once (`arc_trl/config/defaults.py`), and each place has that value:
an episode in training (`ArcConfig`), in the rollout, in SFT and in `arc-trl evaluate generate` / `score` gets the same
limits, the sandbox's own defaults (`SandboxConfig`, what `arc-trl sft` and `score` run with) included, and the docs'
default tables say the same. `max_output_chars` once was 8000 in `SandboxConfig` and 2000 in `ArcConfig` and
`generate`: SFT reference episodes and scoring replays kept four times the output the trained model is shown."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from arc_trl.config import defaults
from arc_trl.cli.sft import SftArguments
from arc_trl.config import ArcConfig
from arc_trl.eval.generate import add_generate_arguments
from arc_trl.eval.generation_settings import CONFIGURABLE
from arc_trl.eval.score import add_score_arguments, score_completions
from arc_trl.rollout.settings import RolloutSettings
from arc_trl.config.script_args import ArcScriptArguments
from arc_trl.sandbox.config import SandboxConfig
from arc_trl.sandbox.pool import SandboxPool

ROOT = Path(__file__).resolve().parents[3]


def _field_defaults(cls) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def _parameter(function, name: str):
    return inspect.signature(function).parameters[name].default


ARC, SANDBOX, ROLLOUT, SFT, SCRIPT = (_field_defaults(c) for c in (ArcConfig, SandboxConfig, RolloutSettings, SftArguments,
                                                                   ArcScriptArguments))
GENERATE = {option: default for option, (_, default) in CONFIGURABLE.items()}

# constant -> {place: value there}
PLACES = {
    "SANDBOX_TIMEOUT_S": {"ArcConfig": ARC["sandbox_timeout_s"], "SandboxConfig": SANDBOX["timeout_s"],
                          "generate": GENERATE["timeout_s"]},
    "SANDBOX_MEMORY_MB": {"ArcConfig": ARC["sandbox_memory_mb"], "SandboxConfig": SANDBOX["memory_mb"],
                          "generate": GENERATE["memory_mb"]},
    "SANDBOX_MAX_OUTPUT_CHARS": {"ArcConfig": ARC["sandbox_max_output_chars"], "SandboxConfig": SANDBOX["max_output_chars"],
                                 "generate": GENERATE["max_output_chars"]},
    "SANDBOX_DISK_MB": {"ArcConfig": ARC["sandbox_disk_mb"], "SandboxConfig": SANDBOX["disk_mb"]},
    "SANDBOX_MAX_FILES": {"ArcConfig": ARC["sandbox_max_files"], "SandboxConfig": SANDBOX["max_files"]},
    "SANDBOX_IDLE_MEMORY_MB": {"ArcConfig": ARC["sandbox_idle_memory_mb"], "SandboxConfig": SANDBOX["idle_memory_mb"]},
    "SANDBOX_WORKERS": {"ArcConfig": ARC["sandbox_workers"], "SandboxPool": _parameter(SandboxPool, "num_workers"),
                        "score_completions": _parameter(score_completions, "workers")},
    "AGENT_MODE": {"ArcConfig": ARC["agent_mode"], "rollout": ROLLOUT["agent_mode"], "sft": SFT["agent_mode"],
                   "generate": GENERATE["agent_mode"]},
    "MAX_TURNS": {"ArcConfig": ARC["max_turns"], "rollout": ROLLOUT["max_turns"], "generate": GENERATE["max_turns"]},
    "MAX_TOKENS_PER_TURN": {"ArcConfig": ARC["max_tokens_per_turn"], "rollout": ROLLOUT["max_tokens_per_turn"],
                            "generate": GENERATE["max_tokens_per_turn"]},
    "MAX_COMPLETION_LENGTH": {"rollout": ROLLOUT["max_completion_length"],
                              "generate": GENERATE["max_completion_length"]},
    "ROLLOUT_SCHEDULING": {"ArcConfig": ARC["rollout_scheduling"], "rollout": ROLLOUT["scheduling"],
                           "generate": GENERATE["rollout_scheduling"]},
    "CHAT_TEMPLATE": {"ArcScriptArguments": SCRIPT["chat_template"], "sft": SFT["chat_template"],
                      "generate": GENERATE["chat_template"]},
    "TEMPERATURE": {"ArcConfig.eval_temperature": ARC["eval_temperature"], "generate": GENERATE["temperature"]},
    "TOP_P": {"generate": GENERATE["top_p"]},
    "TOP_K": {"generate": GENERATE["top_k"]},
    "MIN_P": {"generate": GENERATE["min_p"]},
    "REPETITION_PENALTY": {"generate": GENERATE["repetition_penalty"]},
    "EVAL_N_PREDICTIONS": {"ArcConfig": ARC["eval_n_predictions"]},
    "EVAL_MAX_TASKS": {"ArcConfig": ARC["eval_max_tasks"]},
    # and the rollout's per-request clients of a trainer without an ArcConfig (trl_internals.request_timeout_s)
    "VLLM_REQUEST_TIMEOUT_S": {"ArcConfig": ARC["vllm_request_timeout_s"]},
}  # (the names the choice keys take, agent modes among them: tests/unit/package/test_registries.py)


@pytest.mark.parametrize("name", list(PLACES))
def test_each_place_has_the_one_default(name):
    value = getattr(defaults, name)
    assert PLACES[name] == {place: value for place in PLACES[name]}, f"defaults.{name} = {value!r}"


def test_every_shared_default_is_checked_here():
    constants = {name for name in vars(defaults) if name.isupper()}
    assert constants == set(PLACES)


def test_the_sandbox_the_trainer_builds_is_the_default_sandbox():
    """ArcConfig's sandbox (training) and SandboxConfig() (arc-trl sft, score, a bare SandboxPool) are the same."""
    assert ArcConfig().sandbox_config() == SandboxConfig()


def test_score_and_generate_command_lines_default_to_the_same_sandbox():
    score = add_score_arguments(argparse.ArgumentParser()).parse_args(["--dataset", "d", "--completions", "c",
                                                                      "--output-dir", "o"])
    assert (score.timeout_s, score.memory_mb) == (defaults.SANDBOX_TIMEOUT_S, defaults.SANDBOX_MEMORY_MB)
    generate = add_generate_arguments(argparse.ArgumentParser()).parse_args(["--dataset", "d", "--output-dir", "o"])
    assert score.workers == generate.workers <= defaults.SANDBOX_WORKERS
    helps = {action.dest: action.help for action in add_generate_arguments(argparse.ArgumentParser())._actions}
    assert f"(default {defaults.SANDBOX_MAX_OUTPUT_CHARS})" in helps["max_output_chars"]
    assert f"(default {defaults.MAX_TURNS})" in helps["max_turns"]


def test_the_in_training_evaluation_callback_defaults_to_arc_configs_values():
    """Read from the source (importing the callback imports transformers): each default is `defaults.NAME`, the
    constant ArcConfig's eval_* key uses."""
    tree = ast.parse((ROOT / "arc_trl" / "eval" / "callback.py").read_text())
    init = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    args = init.args.args[-len(init.args.defaults):]
    named = {arg.arg: ast.unparse(default) for arg, default in zip(args, init.args.defaults)}
    assert named["n_predictions"] == "defaults.EVAL_N_PREDICTIONS"
    assert named["max_tasks"] == "defaults.EVAL_MAX_TASKS"
    assert named["temperature"] == "defaults.TEMPERATURE"


def test_sampling_defaults_are_those_trl_trains_with():
    """`generate` samples as training does unless told otherwise: GRPOConfig's defaults (min_p None = off = 0)."""
    from trl import GRPOConfig

    grpo = _field_defaults(GRPOConfig)
    assert (grpo["temperature"], grpo["top_p"], grpo["top_k"], grpo["min_p"] or 0.0, grpo["repetition_penalty"]) == (
        defaults.TEMPERATURE, defaults.TOP_P, defaults.TOP_K, defaults.MIN_P, defaults.REPETITION_PENALTY)


def _value(text: str):
    """A table cell: `10 000` -> 10000.0, `None`, `True`."""
    return {"None": None, "True": True}[text] if text in ("None", "True") else float(text.replace(" ", ""))


def test_the_sandbox_page_lists_sandbox_configs_defaults():
    rows = re.findall(r"^\| `([\w` /]+)` \| ([^|]+) \|", (ROOT / "docs" / "sandbox.md").read_text(), flags=re.M)
    checked = 0
    for names, values in rows:
        names, values = [n.strip(" `") for n in names.split("/")], [v.strip() for v in values.split(" / ")]
        for name, value in zip(names, values):
            if name in SANDBOX and re.fullmatch(r"[\d. ]+|None|True", value):
                assert _value(value) == SANDBOX[name], f"docs/sandbox.md: {name} {value}, SandboxConfig {SANDBOX[name]}"
                checked += 1
    assert checked >= 10  # timeout, memory, output, threads, recursion, code, blocks, session CPU, files, disk, ...


def test_the_evaluation_page_lists_generates_defaults():
    text = (ROOT / "docs" / "evaluation.md").read_text()
    paragraph = text[text.index("Agent and sampling options:"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    found = dict(re.findall(r"`--([\w-]+)` \((\d[\d.]*)", paragraph))
    assert len(found) >= 9, found
    for option, value in found.items():
        assert float(value) == GENERATE[option.replace("-", "_")], f"docs/evaluation.md: --{option} ({value})"
