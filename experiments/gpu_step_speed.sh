#!/usr/bin/env bash
# The learning step before and after a change (.baseline/ = git archive of the commit before it), and the 8B recipe
# with WITH_8B=1. Figures: docs/benchmarks.md and results/gpu_step_summary.json
# (python benchmarks/step_summary.py --out results/gpu_step_summary.json --shape NAME BEFORE.json AFTER.json).
set -euo pipefail
python -m arc_experiments.gpu speed --out "${1:?output folder}" ${WITH_8B:+--with-8b}
