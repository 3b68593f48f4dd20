# The two quick-start commands (see README): `make demo` and `make test`. Each installs what it needs into .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
export VLLM_CPU_KVCACHE_SPACE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export WANDB_MODE ?= offline

.PHONY: setup browser demo demo-learning test test-fast test-integration test-slow lint

setup:
	@bash scripts/setup_env.sh

# Debian's chromium for the test that opens `arc-trl view`'s report in a real browser (skipped without it)
browser:
	@bash scripts/setup_browser.sh

# Main job, a few minutes on 2 CPU cores: tiny local Qwen3 -> SFT warm start on synthetic reference REPL episodes
# (the student; and the OPD teacher: the student trained longer) -> GRPO + on-policy distillation on fresh synthetic
# tasks: sandboxed REPL episodes, rewards, checkpoints, dumped rollouts, a summary with the step-time budget.
# The models are reused by `make demo-learning` (same folders and configs); the RL run is redone each time.
DEMO := outputs/demo
ARC := $(PY) -m arc_trl
demo: setup
	$(ARC) build-tiny-model --out $(DEMO)/model
	test -f $(DEMO)/student/model.safetensors || $(ARC) sft --config configs/demo/sft-student.yaml
	test -f $(DEMO)/teacher/model.safetensors || $(ARC) sft --config configs/demo/sft-teacher.yaml
	rm -rf $(DEMO)/quick
	$(ARC) train --config configs/demo/grpo-opd.yaml --output_dir $(DEMO)/quick --max_steps 16 \
		--save_strategy steps --save_steps 8 --dump_rollouts 2

# The CPU learning demonstration of docs/learning.md (~14 min): SFT -> measure -> GRPO + OPD (and GRPO alone) -> measure.
# The experiment lives in lab/ (lab/README.md): on the path here whichever venv runs it.
demo-learning: setup
	PYTHONPATH=lab$${PYTHONPATH:+:$$PYTHONPATH} $(PY) -m arc_experiments.learning --fresh --ablation

# Two workers, each taking a whole file (its module fixtures and engines built once), longest file first
# (tests/file_order.py, tests/durations.json). TEST_WORKERS=1 runs the suite in one process.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The whole suite (CI's command): the unit tests and the integration tests that train, sample and serve on CPU, and
# the lab's tests (lab/tests: the experiments, their tooling and committed results).
test: setup browser
	$(PYTEST) tests lab/tests --durations=40

# The lanes (markers in pyproject.toml): the edit loop (tests/unit, lab/tests/unit), the integration tests but the slow ones, the
# slow ones (the learning run, the README's quick start, the collapse runs: `slow`).
test-fast: setup
	$(PYTEST) tests/unit lab/tests/unit

test-integration: setup
	$(PYTEST) tests/integration lab/tests/integration -m "not slow" --durations=20

test-slow: setup
	$(PYTEST) tests lab/tests -m slow --durations=20

lint: setup
	$(VENV)/bin/ruff check arc_trl scripts tests benchmarks lab
