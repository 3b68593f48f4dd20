#!/usr/bin/env bash
# A step before and after a change (.baseline/ = git archive of the commit before it): the 0.6B learning step and the
# learning subject's (SmolLM2) on one machine, the 8B recipe's (SPEED_8B=1) on another. Figures: docs/benchmarks.md
# and docs/gpu_step_summary.json (python benchmarks/step_summary.py --out ... --shape NAME BEFORE.json AFTER.json).
set -euo pipefail
export PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"  # lab/: the experiments
if [ -n "${SPEED_8B:-}" ]; then
  python -m arc_experiments.gpu speed8b --out "${1:?output folder}"
else
  python -m arc_experiments.gpu speed speed-subject --out "${1:?output folder}"
fi
