#!/usr/bin/env bash
# The learning experiment on one GPU (configs/gpu/learning): student, privileged teacher, both RL arms per seed,
# held-out evaluations. Figures: docs/learning.md and results/gpu_learning_summary.json
# (arc-trl experiment --configs configs/gpu/learning --report OUT/results.json).
set -euo pipefail
python -m arc_experiments.gpu teachers learning --out "${1:?output folder}"
