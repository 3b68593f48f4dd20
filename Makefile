# The two quick-start commands (see README): `make demo` and `make test`. Each installs what it needs into .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
export VLLM_CPU_KVCACHE_SPACE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export WANDB_MODE ?= offline

.PHONY: setup demo demo-learning test lint

setup:
	@bash scripts/setup_env.sh

# Main job on the embedded default: tiny local Qwen3 -> short SFT warm start on synthetic reference episodes (so it
# writes code) -> GRPO on bundled ARC-AGI-1 tasks with colocated vLLM (CPU), sandboxed REPL episodes, a checkpoint.
demo: setup
	$(PY) scripts/build_tiny_model.py --out outputs/tiny-model
	test -f outputs/tiny-sft/model.safetensors || $(PY) scripts/sft.py --config configs/sft-tiny-cpu.yaml
	$(PY) scripts/train.py --config configs/tiny-cpu.yaml

# The CPU learning demonstration of docs/learning.md (~14 min): SFT -> measure -> GRPO + OPD (and GRPO alone) -> measure.
demo-learning: setup
	$(PY) scripts/demo_learning.py --fresh --ablation

test: setup
	$(PY) -m pytest -q tests

lint: setup
	$(VENV)/bin/ruff check arc_trl scripts tests benchmarks
