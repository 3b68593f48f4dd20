#!/usr/bin/env bash
# The learning experiment on one GPU (configs/gpu/smollm2: SmolLM2-135M-Instruct from PyPI): the student and its
# privileged teacher, the validation sweep (learning rate x teacher_tau, then the temperature), both RL arms x 3 seeds
# on the held-out tasks, ARC-AGI-1. Figures: docs/learning.md and results/gpu_learning_smollm2_summary.json
# (~24 + 7 + 21 + 12 min on an H100, the student and teacher built once). The arms use the
# recipes written in arms.yaml and profile.yaml (chosen_steps) by the sweep of 2026-11-25: after a new sweep, copy
# its choice (/tmp/arc-gpu/smollm2/sweep/choice.json, best_per_arm) into them before running arms.
set -euo pipefail
export PYTHONPATH="$(cd "$(dirname "$0")/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"  # lab/: the experiments
python -m arc_experiments.gpu teachers sweep temperature arms arc-agi-1 --configs configs/gpu/smollm2 --out "${1:?output folder}"
