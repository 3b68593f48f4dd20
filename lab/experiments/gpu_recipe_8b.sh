#!/usr/bin/env bash
# The 8B one-GPU recipe (configs/qwen3-8b-1gpu-colocate.yaml) on a random 8B shape with every turn forced to its cap:
# step time, its parts and peak memory; then one provoked collapse-guard rollback. Figures: docs/benchmarks.md,
# docs/collapse.md.
set -euo pipefail
export PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"  # lab/: the experiments
python -m arc_experiments.gpu 8b collapse8b --out "${1:?output folder}"
