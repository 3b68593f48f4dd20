"""`arc-trl evaluate generate --kv-cache-memory-gib`: the engine's KV cache fixed instead of profiled (the profile
fails when another process on the GPU frees memory meanwhile, e.g. a training beside the evaluation)."""

import argparse

import pytest

from arc_trl.eval.generate import add_generate_arguments
from arc_trl.eval.generation_backends import engine_memory_kwargs
from arc_trl.eval.generation_settings import GenerateInputError


def test_the_flag_becomes_vllms_kv_cache_bytes_and_its_absence_leaves_the_profile():
    args = add_generate_arguments(argparse.ArgumentParser()).parse_args(
        ["--model", "m", "--dataset", "d", "--output-dir", "o", "--kv-cache-memory-gib", "12"])
    assert engine_memory_kwargs(args.kv_cache_memory_gib) == {"kv_cache_memory_bytes": 12 * 2**30}
    default = add_generate_arguments(argparse.ArgumentParser()).parse_args(
        ["--model", "m", "--dataset", "d", "--output-dir", "o"])
    assert default.kv_cache_memory_gib is None and engine_memory_kwargs(None) == {}


def test_a_cache_that_cannot_exist_is_refused_by_name():
    with pytest.raises(GenerateInputError, match="--kv-cache-memory-gib must be > 0"):
        engine_memory_kwargs(0.0)
