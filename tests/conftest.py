"""Shared pytest fixtures: the tiny model/tokenizer (built locally, no network) and small hand-made ARC tasks."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is "experimental" in TRL 1.16
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache per CPU engine

from arc_trl.data.task import ArcTask, Pair
from file_order import pytest_collection_modifyitems, pytest_runtest_logreport, pytest_sessionfinish  # noqa: F401


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A random-init tiny Qwen3 model + tokenizer written once per session (`arc_trl.models.tiny_model.build_tiny_model`)."""
    from arc_trl.models.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """The tiny model's tokenizer alone (ChatML template), without building the model weights."""
    from arc_trl.models.tiny_model import build_tokenizer

    return build_tokenizer()


@pytest.fixture(scope="module")
def pool():
    """A 2-worker sandbox pool (2 s per code run) for a test module's rollouts; the sandbox tests define their own."""
    from arc_trl.sandbox import SandboxConfig, SandboxPool

    with SandboxPool(num_workers=2, config=SandboxConfig(timeout_s=2.0)) as p:
        yield p


@pytest.fixture
def toy_task() -> ArcTask:
    """2 train pairs + 1 test pair; the rule is "mirror left-right". Test output known."""
    return ArcTask(
        id="toy_mirror",
        train=[Pair([[1, 2], [3, 4]], [[2, 1], [4, 3]]), Pair([[5, 0, 6]], [[6, 0, 5]])],
        test_inputs=[[[7, 8], [9, 0]]],
        test_outputs=[[[8, 7], [0, 9]]],
        source="conftest",
    )


@pytest.fixture
def toy_task_two_tests() -> ArcTask:
    """1 train pair + 2 test pairs; the rule is "identity". Test outputs known."""
    return ArcTask(
        id="toy_identity",
        train=[Pair([[1, 0], [0, 1]], [[1, 0], [0, 1]])],
        test_inputs=[[[2, 2], [2, 0]], [[3]]],
        test_outputs=[[[2, 2], [2, 0]], [[3]]],
        source="conftest",
    )


@pytest.fixture
def toy_task_hidden(toy_task) -> ArcTask:
    """`toy_task` without its test outputs (like a Kaggle hidden test task)."""
    return toy_task.without_solutions()


@pytest.fixture(scope="session")
def memorized_task():
    """The synthetic task whose reference REPL episode `memorized_model_dir` has memorised."""
    from arc_trl.synthetic import generate_task

    return generate_task("flip", 0, "tiny")


@pytest.fixture(scope="session")
def memorized_model_dir(tiny_model_dir, memorized_task, tmp_path_factory):
    """The tiny model overfit (~10 s) on one reference REPL episode: it ends turns, writes code and SUBMITs."""
    from arc_trl.sandbox import SandboxPool
    from model_helpers import memorize_episode, reference_episode

    with SandboxPool(num_workers=1) as pool:
        conversation = reference_episode(memorized_task, pool)
    out, loss = memorize_episode(tiny_model_dir, tmp_path_factory.mktemp("memorized"), conversation)
    assert loss < 0.05, f"memorisation did not converge (loss {loss})"
    return out


_DISTRIBUTED_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def _restore_distributed_env():
    """TRL's colocated vLLM writes RANK/WORLD_SIZE/MASTER_* into os.environ; left behind, they make the next trainer
    built in this process multi-process (accelerate), whose gathers then fail once a vLLM teardown has destroyed the
    process group. Each test gets the environment it started with."""
    saved = {key: os.environ.get(key) for key in _DISTRIBUTED_ENV}
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def trainer_builds(monkeypatch) -> list[int]:
    """Counts ArcGRPOTrainer constructions in the test (one entry per build): a model load and, with vLLM, an engine."""
    from arc_trl.trainer import ArcGRPOTrainer

    builds: list[int] = []
    build = ArcGRPOTrainer.__init__

    def counted(self, *args, **kwargs):
        builds.append(1)
        build(self, *args, **kwargs)

    monkeypatch.setattr(ArcGRPOTrainer, "__init__", counted)
    return builds

