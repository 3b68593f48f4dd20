"""The unsloth path's guards, on CPU: config errors, install/version errors, and the loader's glue (fake unsloth)."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from arc_trl.integrations import unsloth_support as us
from arc_trl.train_entry import main

CONFIG = str(Path(__file__).resolve().parents[3] / "configs" / "tiny-cpu.yaml")
GOOD = {"unsloth": "2026.10.7", "unsloth_zoo": "2026.10.7", "trl": "1.15.0", "transformers": "5.17.0",
        "datasets": "4.8.5"}


def _args(**kw):
    base = dict(deepspeed=None, fsdp=None, use_vllm=False, vllm_mode="colocate", vllm_max_model_length=None,
                gradient_checkpointing=True, seed=3)
    return SimpleNamespace(**{**base, **kw})


def _model_args(**kw):
    base = dict(use_peft=True, model_name_or_path="/m", load_in_4bit=False, dtype="bfloat16", lora_r=8,
                lora_alpha=16, lora_dropout=0.0, lora_target_modules=None, use_rslora=False)
    return SimpleNamespace(**{**base, **kw})


def test_use_unsloth_without_use_peft_stops_at_parse_time(tmp_path):
    argv = ["--config", CONFIG, "--model_name_or_path", "/nonexistent", "--output_dir", str(tmp_path),
            "--use_unsloth", "true", "--use_peft", "false", "--report_to", "none"]
    with pytest.raises(SystemExit, match=r"tiny-cpu.yaml: use_unsloth: true: use_peft: true is needed"):
        main(argv)


@pytest.mark.parametrize(("args", "env", "world", "expected"), [
    (_args(deepspeed="ds.json"), {}, 1, "DeepSpeed is not supported"),
    (_args(), {"ACCELERATE_USE_DEEPSPEED": "true"}, 1, "DeepSpeed is not supported"),
    (_args(fsdp="full_shard"), {}, 1, "FSDP is not supported"),
    (_args(), {}, 2, r"2 training processes \(WORLD_SIZE=2\).*single_gpu.yaml"),
    (_args(use_vllm=True, vllm_mode="server"), {}, 1, "vllm_mode: server is not supported"),
])
def test_unsupported_layouts_are_named(monkeypatch, args, env, world, expected):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(us.UnslothConfigError, match=expected):
        us.check_unsloth_config(args, _model_args(), world_size=world)
    monkeypatch.setenv("WORLD_SIZE", str(world))  # the default reads the launcher's WORLD_SIZE
    with pytest.raises(us.UnslothConfigError, match=expected):
        us.check_unsloth_config(args, _model_args())


def test_supported_layout_passes():
    us.check_unsloth_config(_args(use_vllm=True, vllm_mode="colocate"), _model_args(), world_size=1)


def _fake_dist(root: Path, name: str, version: str) -> None:
    info = root / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_old_unsloth_install_names_the_versions_that_go_together(tmp_path, monkeypatch):
    # what an unpinned `pip install unsloth` gave beside our pins: unsloth 2025.7.2 (predates transformers 5)
    _fake_dist(tmp_path, "unsloth", "2025.7.2")
    _fake_dist(tmp_path, "unsloth_zoo", "2025.7.4")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    found = us.installed_versions()
    assert found["unsloth"] == "2025.7.2" and found["unsloth_zoo"] == "2025.7.4"
    with pytest.raises(us.UnslothUnavailableError) as err:
        us.check_unsloth_available(cuda=True)
    message = str(err.value)
    assert "unsloth 2025.7.2 (needs >=2026.10)" in message and "unsloth_zoo 2025.7.4 (needs >=2026.10)" in message
    assert "trl==1.15.0" in message and "transformers>=5.16.1,<=5.17.0" in message and "datasets>=4.7,<5" in message
    assert "pip install -e '.[unsloth]'" in message


def test_version_rules():
    assert us.version_problems(GOOD) == []
    assert us.version_problems({**GOOD, "transformers": "5.16.1", "datasets": "4.7.0", "trl": "1.15.1"}) == []
    assert us.version_problems({**GOOD, "trl": "1.16.0", "transformers": "5.19.0", "datasets": "5.2.0"}) == [
        "trl 1.16.0 (needs ==1.15.*)", "transformers 5.19.0 (needs >=5.16.1,<=5.17.0)",
        "datasets 5.2.0 (needs >=4.7,<5)",
    ]
    assert us.version_problems({**GOOD, "unsloth_zoo": None}) == ["unsloth_zoo not installed (needs >=2026.10)"]


def test_availability_order_missing_then_versions_then_gpu(monkeypatch):
    with pytest.raises(us.UnslothUnavailableError, match="'unsloth' package is not installed"):
        us.check_unsloth_available({**GOOD, "unsloth": None}, cuda=True)
    with pytest.raises(us.UnslothUnavailableError, match=r"trl 1.16.0 \(needs ==1.15.\*\)"):
        us.check_unsloth_available({**GOOD, "trl": "1.16.0"}, cuda=False)
    with pytest.raises(us.UnslothUnavailableError, match="needs a CUDA GPU"):
        us.check_unsloth_available(GOOD, cuda=False)
    us.check_unsloth_available(GOOD, cuda=True)
    monkeypatch.setenv(us.SKIP_VERSION_CHECK_ENV, "1")  # the escape hatch skips only the version rule
    us.check_unsloth_available({**GOOD, "trl": "1.16.0"}, cuda=True)


def test_loader_passes_our_lora_settings_and_keeps_our_tokenizer(monkeypatch):
    calls = {}

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(**kw):
            calls["load"] = kw
            return "base-model", "unsloth-tokenizer"

        @staticmethod
        def get_peft_model(model, **kw):
            calls["peft"] = (model, kw)
            return "peft-model"

    monkeypatch.setitem(sys.modules, "unsloth", types.SimpleNamespace(FastLanguageModel=FastLanguageModel))
    monkeypatch.setattr(us, "check_unsloth_available", lambda: None)
    model_args = _model_args(lora_target_modules=["q_proj", "v_proj"], use_rslora=True, lora_dropout=0.05)
    model, tokenizer, peft_config = us.load_unsloth_model(model_args, _args(), "our-tokenizer", max_seq_length=2048)
    assert (model, tokenizer, peft_config) == ("peft-model", "our-tokenizer", None)
    assert calls["load"] == {"model_name": "/m", "max_seq_length": 2048, "load_in_4bit": False,
                             "dtype": torch.bfloat16, "fast_inference": False, "use_gradient_checkpointing": "unsloth"}
    assert calls["peft"] == ("base-model", {
        "r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj"], "use_rslora": True,
        "use_gradient_checkpointing": "unsloth", "random_state": 3})
    with pytest.raises(us.UnslothConfigError, match="use_peft"):  # the loader re-checks the config itself
        us.load_unsloth_model(_model_args(use_peft=False), _args(), "our-tokenizer")


def test_torch_logprob_matches_trls_fused_head_function():
    """TRL 1.15's fused LM head is Triton-only; arc_trl.integrations.trl_compat's torch stand-in (used on CPU with TRL 1.15) must
    give what TRL 1.16's own function gives on CPU: log-probs, entropy, the logged stats and the gradients."""
    import trl
    from packaging.version import Version

    from arc_trl.integrations.trl_compat import TorchChunkedLogProb, use_torch_logprob_on_cpu

    if Version(trl.__version__) < Version("1.16"):
        assert use_torch_logprob_on_cpu() == (not torch.cuda.is_available())
        pytest.skip("TRL 1.15's reference function needs Triton; compared under TRL 1.16")
    from trl.kernels import ChunkedLogProbFunction

    assert use_torch_logprob_on_cpu() is False  # TRL 1.16: nothing to patch
    gen = torch.Generator().manual_seed(0)
    for softcap, with_bias in ((None, False), (3.0, True)):
        hidden = torch.randn(7, 16, generator=gen, dtype=torch.float64).float().requires_grad_()
        weight = (0.5 * torch.randn(50, 16, generator=gen)).requires_grad_()
        bias = torch.randn(50, generator=gen).requires_grad_() if with_bias else None
        targets = torch.randint(0, 50, (7,), generator=gen)
        targets[0] = int((hidden[0].detach() @ weight.detach().T).argmax())  # one top-1 hit
        results = []
        for fn in (ChunkedLogProbFunction, TorchChunkedLogProb):
            out = fn.apply(hidden, weight, bias, targets, 0.7, 16, softcap, 1.3)
            grads = torch.autograd.grad(out[0].sum() + 0.5 * out[1].sum(), [hidden, weight])
            results.append((out, grads))
        (ref, ref_grads), (got, got_grads) = results
        for a, b in zip(ref[:4], got[:4]):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
        assert torch.equal(ref[4], got[4]) and (with_bias or bool(got[4][0]))  # the planted top-1 hit counts
        for a, b in zip(ref_grads, got_grads):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
