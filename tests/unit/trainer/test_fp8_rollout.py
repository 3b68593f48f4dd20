"""FP8 rollouts without an engine: the keys' checks, what reaches a colocated `vllm.LLM` and the student server's
command line, and the re-quantizing hook run by TRL's own colocated `sync_weights` on a stand-in engine (the engine
itself: tests/integration/test_fp8_sync.py, on CPU; benchmarks/fp8_sync_check.py on a GPU)."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from arc_trl.config import ArcConfig
from arc_trl.integrations.fp8_rollout import engine_kwargs, server_args
from arc_trl.launch.server_plan import PlanError, build_plan
from arc_trl.integrations.trl_internals import colocated_engine_kwargs, requantize_on_sync


@pytest.mark.parametrize(("rollout", "kv", "expected"), [
    ("bf16", "auto", {}),
    ("fp8", "auto", {"quantization": "fp8"}),
    ("fp8", "fp8", {"quantization": "fp8", "kv_cache_dtype": "fp8"}),
    ("bf16", "fp8", {"kv_cache_dtype": "fp8"}),
])
def test_engine_kwargs_and_server_args_of_each_setting(rollout, kv, expected):
    assert engine_kwargs(rollout, kv) == expected
    flags = {"quantization": "--quantization", "kv_cache_dtype": "--kv_cache_dtype"}
    assert server_args(rollout, kv, ["--max_model_len", "2048"]) == [
        part for key, value in expected.items() for part in (flags[key], value)]


def test_unknown_values_name_the_key():
    # (FP8 without vLLM has no effect: a warning, tests/unit/launch/test_ineffective_keys.py)
    with pytest.raises(ValueError, match="vllm_rollout_dtype='int8' is not one of bf16, fp8"):
        ArcConfig(vllm_rollout_dtype="int8")
    with pytest.raises(ValueError, match="vllm_kv_cache_dtype='fp16' is not one of auto, fp8"):
        ArcConfig(vllm_kv_cache_dtype="fp16")


SERVER = {"model_name_or_path": "/models/student", "use_vllm": True, "vllm_mode": "server", "vllm_gpus": 1,
          "trainer_gpus": 1}


def _student(plan):
    [student] = plan.servers
    return student.command


def test_the_student_server_gets_the_fp8_flags_from_the_yaml_or_the_command_line(tmp_path):
    bf16 = _student(build_plan(SERVER, tmp_path / "c.yaml", ["0", "1"]))
    assert "--quantization" not in bf16 and "--kv_cache_dtype" not in bf16
    fp8 = _student(build_plan({**SERVER, "vllm_rollout_dtype": "fp8", "vllm_server_args": "--max_model_len 2048"},
                              tmp_path / "c.yaml", ["0", "1"]))
    assert fp8[fp8.index("--quantization") + 1] == "fp8" and "--kv_cache_dtype" not in fp8
    assert fp8[-2:] == ["--max_model_len", "2048"]  # the config's own server arguments last, as before
    both = _student(build_plan(SERVER, tmp_path / "c.yaml", ["0", "1"],
                               train_args=["--vllm_rollout_dtype", "fp8", "--vllm_kv_cache_dtype=fp8"]))
    assert both[both.index("--quantization") + 1] == "fp8" and both[both.index("--kv_cache_dtype") + 1] == "fp8"


@pytest.mark.parametrize("given", ["--quantization fp8", "-q awq", "--kv-cache-dtype=fp8_e5m2"])
def test_a_server_flag_set_twice_is_a_plan_error_naming_both_keys(tmp_path, given):
    config = {**SERVER, "vllm_rollout_dtype": "fp8", "vllm_kv_cache_dtype": "fp8", "vllm_server_args": given}
    with pytest.raises(PlanError, match="vllm_server_args sets --.* and vllm_.*_dtype='fp8' sets it too"):
        build_plan(config, tmp_path / "c.yaml", ["0", "1"])


def test_trls_colocated_llm_gets_the_engine_kwargs_only_inside_the_block(monkeypatch):
    import trl.generation.vllm_generation as vllm_generation

    built = []
    monkeypatch.setattr(vllm_generation, "LLM", lambda **kwargs: built.append(kwargs) or "engine")
    with colocated_engine_kwargs({"quantization": "fp8", "kv_cache_dtype": "fp8"}):
        assert vllm_generation.LLM(model="m", quantization=None, seed=0) == "engine"  # as TRL's _init_vllm calls it
        with pytest.raises(ValueError, match="vllm_rollout_dtype: fp8 cannot serve a bitsandbytes-quantized policy"):
            vllm_generation.LLM(model="m", quantization="bitsandbytes")
    vllm_generation.LLM(model="m", quantization=None)
    assert built == [{"model": "m", "quantization": "fp8", "seed": 0, "kv_cache_dtype": "fp8"},
                     {"model": "m", "quantization": None}]
    with colocated_engine_kwargs({}):  # bf16: TRL's class untouched
        vllm_generation.LLM(model="m", quantization="bitsandbytes")
    assert built[-1] == {"model": "m", "quantization": "bitsandbytes"}


class _Recorder:
    def __init__(self):
        self.events = []

    def model_runner(self):
        model = SimpleNamespace(load_weights=lambda weights: self.events.extend(("load", n) for n, _ in weights))
        return SimpleNamespace(model=model, model_config="model-config")


def _stand_in_generation(events: _Recorder, mode: str = "colocate"):
    """What TRL 1.16's `VLLMGeneration.sync_weights` reads of itself, colocated: the engine path it loads through."""
    runner = events.model_runner()
    llm = SimpleNamespace(llm_engine=SimpleNamespace(model_executor=SimpleNamespace(
        driver_worker=SimpleNamespace(model_runner=runner))), reset_prefix_cache=lambda: events.events.append("reset"))
    vg = SimpleNamespace(mode=mode, enable_sleep_mode=False, accelerator=SimpleNamespace(is_main_process=True), llm=llm)
    vg._iter_named_params = lambda: iter([("a.weight", 1), ("b.weight", 2), ("c.bias", 3)])
    return vg, runner


@pytest.fixture
def reload_calls(monkeypatch):
    """vLLM's layerwise-reload module, recorded (the real one: tests/integration/test_fp8_sync.py)."""
    recorder = _Recorder()
    module = types.ModuleType("vllm.model_executor.model_loader.reload")
    module.initialize_layerwise_reload = lambda model: recorder.events.append(("start", model))
    module.finalize_layerwise_reload = lambda model, config: recorder.events.append(("finish", model, config))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return recorder


def test_each_colocated_sync_brackets_exactly_its_loads_with_one_layerwise_reload(reload_calls):
    from trl.generation.vllm_generation import VLLMGeneration

    vg, runner = _stand_in_generation(reload_calls)
    assert requantize_on_sync(vg)
    for _ in range(2):  # two optimizer steps, two syncs: one reload each
        VLLMGeneration.sync_weights(vg)  # TRL's own colocated sync, on the stand-in
    loads = [("load", "a.weight"), ("load", "b.weight"), ("load", "c.bias")]
    one_sync = [("start", runner.model), *loads, ("finish", runner.model, "model-config"), "reset"]
    assert reload_calls.events == one_sync * 2


def test_server_mode_is_left_to_the_servers_weight_transfer_engine(reload_calls):
    vg, _ = _stand_in_generation(reload_calls, mode="server")
    walk = vg._iter_named_params
    assert not requantize_on_sync(vg)
    assert vg._iter_named_params is walk and reload_calls.events == []


class _CudaGraphWrapper:
    """vLLM's `CUDAGraphWrapper` as its V1 GPU runner keeps it in `model_runner.model` under full CUDA graphs: no
    module itself, attributes forwarded to the model (vllm/compilation/cuda_graph.py, `__getattr__`)."""

    def __init__(self, runnable):
        self.runnable = runnable

    def __getattr__(self, key):
        return getattr(self.runnable, key)


@pytest.mark.parametrize("runner_kind", ["v1-cuda-graphs", "v2", "without-get_model"])
def test_the_reload_runs_on_the_model_itself_whichever_runner_vllm_built(reload_calls, runner_kind):
    """vLLM 0.26 on a GPU builds the V2 runner for dense models (`get_model()` returns its `model`), the V1 runner
    otherwise (its `model` a CUDA-graph wrapper under full graphs, `get_model()` unwrapping); TRL loads through
    `model_runner.model` either way. The layerwise reload must walk the model's own modules."""
    from trl.generation.vllm_generation import VLLMGeneration

    vg, runner = _stand_in_generation(reload_calls)
    model = runner.model
    if runner_kind == "v1-cuda-graphs":
        runner.model = _CudaGraphWrapper(model)
        runner.get_model = lambda: model
    elif runner_kind == "v2":
        runner.get_model = lambda: runner.model
    assert requantize_on_sync(vg)
    VLLMGeneration.sync_weights(vg)
    start, *loads, finish, reset = reload_calls.events
    assert start[0] == "start" and start[1] is model
    assert finish[0] == "finish" and finish[1] is model and finish[2] == "model-config"
    assert loads == [("load", "a.weight"), ("load", "b.weight"), ("load", "c.bias")] and reset == "reset"


def test_fp8_under_a_sequence_level_is_ratio_warns_once_and_token_level_or_bf16_does_not(monkeypatch, caplog):
    """Under FP8 sampling an episode's sequence-level ratio drifts with its length (docs/fp8.md: 0.5-1.8% of tokens
    masked on SmolLM2 on an H100, one run's smallest weight 6e-7): say so once, and only where it applies."""
    import logging
    from types import SimpleNamespace

    from arc_trl.config import warn_once
    from arc_trl.integrations import fp8_rollout
    from arc_trl.config import ArcConfig

    monkeypatch.setattr(warn_once, "said", set())  # as in a new process
    caplog.set_level(logging.WARNING, logger=fp8_rollout.__name__)

    def check(dtype: str, mode: str, use_vllm: bool = True, correction: bool = True) -> list[str]:
        caplog.clear()
        args = SimpleNamespace(use_vllm=use_vllm, steps_per_generation=None, gradient_accumulation_steps=1,
                               vllm_importance_sampling_correction=correction, vllm_importance_sampling_mode=mode)
        ArcConfig(vllm_rollout_dtype=dtype).check_with(args)
        return [r.getMessage() for r in caplog.records if r.name == fp8_rollout.__name__]

    [message] = check("fp8", "sequence_mask")
    assert "vllm_importance_sampling_mode: sequence_mask" in message and "token_truncate" in message
    assert check("fp8", "sequence_mask") == []  # the parser and the trainer both check: one warning a process
    assert check("fp8", "sequence_truncate")[0].startswith("config: vllm_rollout_dtype: fp8 with")
    for quiet in (("fp8", "token_truncate"), ("fp8", "token_mask"), ("bf16", "sequence_mask"),
                  ("fp8", "sequence_mask", False), ("fp8", "sequence_mask", True, False)):
        assert check(*quiet) == [], quiet


def test_a_fixed_kv_cache_reaches_only_a_colocated_engine_in_bytes_beside_the_fp8_settings():
    from arc_trl.integrations.colocated_engine import colocated_engine_extra

    assert colocated_engine_extra(True, "fp8", "auto", 20.0) == {"quantization": "fp8",
                                                                 "kv_cache_memory_bytes": 20 * 2**30}
    assert colocated_engine_extra(True, "bf16", "auto", 0.25) == {"kv_cache_memory_bytes": 2**28}
    assert colocated_engine_extra(True, "bf16", "auto", None) == {}  # vLLM profiles and sizes it itself
    assert colocated_engine_extra(False, "fp8", "fp8", 20.0) == {}  # a server's command line carries its settings
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match=f"vllm_kv_cache_memory_gib must be > 0 .*got {bad}"):
            ArcConfig(vllm_kv_cache_memory_gib=bad)
