#!/usr/bin/env bash
# The GPU validation runs behind docs/benchmarks.md ("GPU"). Run from the repo root on a GPU machine with torch,
# transformers, accelerate and peft; missing wheels (trl, datasets, deepspeed, ...) are installed from .whl/ if present.
#   bash benchmarks/gpu_runs.sh small OUTDIR   # 1 GPU vs ZeRO-2 vs ZeRO-3 (2 GPUs), Qwen3-0.6B shape, + full-loop runs
#   bash benchmarks/gpu_runs.sh 8b OUTDIR      # Qwen3-8B shape, LoRA + gradient checkpointing, 1 GPU, + full-loop run
#   bash benchmarks/gpu_runs.sh 8b-zero3 OUTDIR  # the same on 2 GPUs under DeepSpeed ZeRO-3
set -uo pipefail
phase=${1:?small or 8b}; out=${2:?output dir}; mkdir -p "$out"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled NCCL_NVLS_ENABLE=0
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONPATH=${PYTHONPATH:-}:$PWD
ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
python3 -c "import torch, transformers, accelerate, peft, trl, deepspeed, datasets; print(torch.__version__, transformers.__version__, accelerate.__version__, peft.__version__, trl.__version__, deepspeed.__version__, datasets.__version__)"
echo "== $(date -u) $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x$ngpu"
run() { local name=$1; shift; echo "== $name: $*"; local t=$SECONDS; timeout ${RUN_TIMEOUT:-240} "$@" > "$out/$name.log" 2>&1; local rc=$?;
        echo "   rc=$rc in $((SECONDS - t)) s"; tail -3 "$out/$name.log" | cut -c1-300; }
bench=benchmarks/gpu_trainer_bench.py
if [ "$phase" = small ]; then
  common=(--shape qwen3-0.6b --seq-len 2048 --global-batch 16 --micro-batch 4 --steps 5 --gradient-checkpointing)
  run bench_1gpu  env CUDA_VISIBLE_DEVICES=0 python3 -m accelerate.commands.launch --config_file accelerate_configs/single_gpu.yaml $bench "${common[@]}" --out "$out/bench_1gpu.json"
  for n in 2 4; do
    [ "$ngpu" -ge $n ] || continue
    for z in zero2 zero3; do
      run bench_${z}_x$n python3 -m accelerate.commands.launch --config_file accelerate_configs/$z.yaml --num_processes $n \
        $bench "${common[@]}" --out "$out/bench_${z}_x$n.json"
    done
  done
  python3 scripts/build_tiny_model.py --shape qwen3-0.6b --out /tmp/qwen3-0.6b --device cuda > /dev/null
  python3 scripts/build_tiny_model.py --shape qwen3-0.6b --seed 1 --out /tmp/qwen3-0.6b-teacher --device cuda > /dev/null
  for z in zero2 zero3; do
    n=$([ "$z" = zero3 ] && [ "$ngpu" -ge 4 ] && echo 4 || echo 2)
    run train_${z}_x$n python3 -m accelerate.commands.launch --config_file accelerate_configs/$z.yaml --num_processes $n \
      scripts/train.py --config configs/gpu/qwen3-0.6b-smoke.yaml --output_dir /tmp/runs/smoke-$z \
      --per_device_train_batch_size $((16 / n))
    cp /tmp/runs/smoke-$z/trainer_state.json "$out/train_${z}_x${n}_state.json" 2>/dev/null
  done
elif [ "$phase" = 8b-zero3 ]; then
  run bench_8b_lora_zero3_x2 python3 -m accelerate.commands.launch --config_file accelerate_configs/zero3.yaml \
    --num_processes 2 $bench --shape qwen3-8b --lora --gradient-checkpointing --seq-len 4096 --global-batch 16 \
    --micro-batch 4 --steps 3 --out "$out/bench_8b_lora_zero3_x2.json"
  python3 scripts/build_tiny_model.py --shape qwen3-8b --out /tmp/qwen3-8b --device cuda > /dev/null
  run train_8b_lora_zero3_x2 python3 -m accelerate.commands.launch --config_file accelerate_configs/zero3.yaml \
    --num_processes 2 scripts/train.py --config configs/gpu/qwen3-8b-lora-smoke.yaml --per_device_train_batch_size 4 \
    --output_dir /tmp/runs/8b-zero3
  cp /tmp/runs/8b-zero3/trainer_state.json "$out/train_8b_lora_zero3_x2_state.json" 2>/dev/null
else
  export CUDA_VISIBLE_DEVICES=0  # single-GPU runs: one visible GPU (else Trainer falls back to DataParallel)
  run bench_8b_lora python3 -m accelerate.commands.launch --config_file accelerate_configs/single_gpu.yaml $bench --shape qwen3-8b --lora \
    --gradient-checkpointing --seq-len 4096 --global-batch 16 --micro-batch 4 --steps 4 --out "$out/bench_8b_lora.json"
  python3 scripts/build_tiny_model.py --shape qwen3-8b --out /tmp/qwen3-8b --device cuda > /dev/null
  run train_8b_lora python3 -m accelerate.commands.launch --config_file accelerate_configs/single_gpu.yaml scripts/train.py \
    --config configs/gpu/qwen3-8b-lora-smoke.yaml
  cp /tmp/runs/qwen3-8b-lora-smoke/trainer_state.json "$out/train_8b_lora_state.json" 2>/dev/null
  run unsloth_guard python3 -c "from arc_trl.unsloth_support import check_unsloth_available as c; c()"
fi
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
