"""Config keys set without effect: a value away from its default that the rest of the config makes the run ignore,
e.g. `peer_max_chars` without `teacher_privileged: peer`, or `vllm_rollout_dtype: fp8` without vLLM.

A warning, not an error: a sweep may set a key in every arm that only some arms use. Each warning is logged once per
process (`ArcConfig.check_with` runs in both `arc-trl train`'s parsing and the trainer). A new rule is one `Rule`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from arc_trl.config.warn_once import warn_once

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rule:
    keys: tuple[str, ...]  # the keys that have no effect unless `applies`
    applies: Callable[[Mapping[str, Any]], bool]  # given the whole config
    why: str  # formatted with the whole config


PEER_KEYS = ("peer_min_reward", "peer_max_chars")
FP8_KEYS = ("vllm_rollout_dtype", "vllm_kv_cache_dtype")
RULES = (
    Rule(PEER_KEYS, lambda c: c["teacher_privileged"] == "peer",
         "it is read only with teacher_privileged: peer (this config: teacher_privileged={teacher_privileged!r})"),
    Rule(FP8_KEYS, lambda c: bool(c["use_vllm"]),
         "it sets the precision of the vLLM engine and this run has none (use_vllm: false: transformers generate "
         "samples with the trainer's own weights)"),
    Rule(("vllm_kv_cache_memory_gib",), lambda c: bool(c["use_vllm"]) and c.get("vllm_mode", "colocate") == "colocate",
         "it sizes a colocated vLLM engine's KV cache and this run has none (use_vllm={use_vllm!r}, "
         "vllm_mode={vllm_mode!r}: a server's engine takes its settings from vllm_server_args)"),
    Rule(("vllm_request_timeout_s",), lambda c: bool(c["use_vllm"]) and c.get("vllm_mode", "colocate") == "server",
         "it bounds the requests to a vLLM server and this run has none (use_vllm={use_vllm!r}, "
         "vllm_mode={vllm_mode!r})"),
)


def ineffective_keys(config: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """One message per key of `config` set away from its value in `defaults` (which holds every key the rules read)
    where that has no effect. `config` may leave keys out: they take their default."""
    values = {**defaults, **config}
    messages = []
    for rule in RULES:
        if rule.applies(values):
            continue
        for key in rule.keys:
            if values[key] != defaults[key]:
                messages.append(f"{key}={values[key]!r} has no effect: {rule.why.format(**values)}")
    return messages


def warn_ineffective_keys(config: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[str]:
    """Log a warning for each of `ineffective_keys` not logged before by this process; all of them are returned."""
    messages = ineffective_keys(config, defaults)
    for message in messages:
        warn_once(logger, f"config: {message}")
    return messages
