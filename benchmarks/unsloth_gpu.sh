#!/usr/bin/env bash
# use_unsloth vs plain PEFT on one GPU: a few GRPO + OPD steps each (benchmarks/unsloth_gpu_bench.py), step time and
# peak memory as JSON, then the unsloth/PEFT ratios. Run from the repo root on the GPU machine:
#   bash benchmarks/unsloth_gpu.sh MODEL_DIR OUT_DIR            # MODEL_DIR: save_pretrained folder + its tokenizer
#   RUNS="peft_hf unsloth_hf" bash benchmarks/unsloth_gpu.sh MODEL_DIR OUT_DIR   # a subset (each run <= RUN_TIMEOUT s)
# Runs: peft_hf / unsloth_hf (transformers generation), peft_vllm / unsloth_vllm (colocated vLLM; skipped without
# vllm); optional: unslothfirst_hf (unsloth imported before TRL, so ArcGRPOTrainer subclasses unsloth's patched
# GRPOTrainer: shows what the import order costs or breaks). Every run uses the same Python path, so both paths
# train on trl 1.15 + datasets 4.8 (the unsloth extra's set).
# Packages: the vLLM bundle (shared/gpu-bundle/build.sh) extracted to $SITE (default /tmp/site), and unsloth's wheels
# from .gpu4/ or $WHEELS (.gpu4/README.txt), installed here into /tmp/unsloth_site, which goes first on PYTHONPATH.
set -uo pipefail
model=${1:?model dir}; out=${2:?output dir}; mkdir -p "$out"
steps=${STEPS:-4}; runs=${RUNS:-peft_hf unsloth_hf peft_vllm unsloth_vllm}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled HF_HUB_OFFLINE=1 VLLM_USE_FLASHINFER_SAMPLER=0
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} UNSLOTH_COMPILE_LOCATION=/tmp/unsloth_compiled_cache
wheels=${WHEELS:-.gpu4}
if ls "$wheels"/*.whl > /dev/null 2>&1 && [ ! -d /tmp/unsloth_site/unsloth ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/unsloth_site "$wheels"/*.whl || exit 1
fi
export PYTHONPATH=/tmp/unsloth_site:${SITE:-/tmp/site}:$PWD
python3 - <<'EOF' | tee "$out/versions.json"
import json, importlib.metadata as md
def v(n):
    try: return md.version(n)
    except md.PackageNotFoundError: return None
names = ["torch", "transformers", "trl", "peft", "accelerate", "datasets", "vllm", "unsloth", "unsloth_zoo", "torchao",
         "xformers", "bitsandbytes"]
print(json.dumps({n: v(n) for n in names}))
EOF
echo "== $(date -u) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
has_vllm=$(python3 -c 'import vllm' > /dev/null 2>&1 && echo 1 || echo 0)
for name in $runs; do
  path=${name%_*}; gen=${name#*_}; [ "$gen" = hf ] && gen=transformers; first=()
  [ "$path" = unslothfirst ] && path=unsloth && first=(--unsloth-first)
  if [ "$gen" = vllm ] && [ "$has_vllm" = 0 ]; then echo "== $name: skipped (no vllm)"; continue; fi
  echo "== $name"; t=$SECONDS
  timeout "${RUN_TIMEOUT:-300}" python3 benchmarks/unsloth_gpu_bench.py --model "$model" --path "$path" --generation "$gen" \
    --steps "$steps" "${first[@]}" --out "$out/$name.json" --run-dir "/tmp/unsloth_bench_runs/$name" > "$out/$name.log" 2>&1
  echo "   rc=$? in $((SECONDS - t)) s"; grep -E '"(ok|error|step_wall_s_median_after_first|train_s_median_after_first|peak_mem_allocated_gib)"' "$out/$name.json" 2> /dev/null \
    || tail -5 "$out/$name.log" | cut -c1-300
done
for gen in hf vllm; do
  if [ -f "$out/peft_$gen.json" ] && [ -f "$out/unsloth_$gen.json" ]; then
    python3 benchmarks/unsloth_gpu_bench.py --compare "$out/peft_$gen.json" "$out/unsloth_$gen.json" | tee "$out/compare_$gen.json"
  fi
done
