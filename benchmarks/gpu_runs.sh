#!/usr/bin/env bash
# The GPU runs behind docs/learning.md ("GPU") and docs/benchmarks.md ("GPU"), on one GPU machine, in a few calls.
#
# The GPU machines have Python 3.12 + torch 2.11 and nothing else we need; vLLM 0.26 (the release that pins torch 2.11)
# + TRL 1.16 come as the bundle of ../shared/gpu-bundle/build.sh, three parts of <= 56 MiB copied into the
# git-ignored folders .gpu1/ .gpu2/ .gpu3/ (each call may carry 64 MiB). Back to back on one warm machine:
#   call 1 (carry .gpu1):  bash benchmarks/gpu_runs.sh stash .gpu1
#   call 2 (carry .gpu2):  bash benchmarks/gpu_runs.sh stash .gpu2
#   call 3 (carry .gpu3):  bash benchmarks/gpu_runs.sh policy  $OUT   # unpacks the bundle, then the stage
#   later calls:           bash benchmarks/gpu_runs.sh learn   $OUT   # (any stage unpacks the bundle if needed)
# Stages (each fits in one 10-minute call on an H100; outputs in OUT, at most 8 files):
#   policy   the realistic GPU policy: Qwen3-0.6B shape, SFT student + longer-SFT teacher, held-out evaluation
#            (scripts/demo_learning.py --configs configs/gpu/learning; models stay in /tmp/arc-gpu/learning)
#   learn    GRPO + OPD from the student, colocated vLLM, then the held-out evaluation
#   control  the same run without the teacher (GRPO only), evaluation, results.json for docs/learning.md
#   measure  step-time parts and trainer/vLLM mismatch (full fine-tune and LoRA), rollout scheduling benchmark
#   8b       configs/qwen3-8b-1gpu-colocate.yaml (LoRA, sleep mode) on an 8B-shaped model: memory and step parts
#   unsloth  unsloth vs plain PEFT on the policy (needs .gpu4/ with the unsloth wheels, see .gpu4/README.txt)
#   zero     trainer benchmark (gpu_trainer_bench.py, Qwen3-0.6B and 8B LoRA shapes) on 1 GPU and, where the
#            machine has them, DeepSpeed ZeRO-2/3 on 2 and 4 GPUs (needs deepspeed: EXTRA="deepspeed==0.19.8")
# Back here: python scripts/demo_learning.py --configs configs/gpu/learning --report RESULTS_JSON rewrites the docs.
set -uo pipefail
stage=${1:?stage}; out=${2:?output dir or folder}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled NCCL_NVLS_ENABLE=0 VLLM_USE_FLASHINFER_SAMPLER=0
work=/tmp/arc-gpu; learning=$work/learning; mkdir -p "$work"

if [ "$stage" = stash ]; then  # keep one part of the bundle on the machine until the last part arrives
  mkdir -p /tmp/stash && cp "$out"/part.* /tmp/stash/ && ls -la /tmp/stash; exit
fi
mkdir -p "$out"
if [ ! -d /tmp/site/vllm ]; then
  if ! ls /tmp/stash/part.* .gpu3/part.* >/dev/null 2>&1; then echo "no vLLM bundle: run the stash calls first"; exit 2; fi
  mkdir -p /tmp/site && cat /tmp/stash/part.* .gpu3/part.* | xz -d -T8 | tar -x -C /tmp/site || exit 2
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
python3 -c "import torch, vllm, trl, transformers, peft; print('torch', torch.__version__, '| vllm', vllm.__version__,
'| trl', trl.__version__, '| transformers', transformers.__version__, '| peft', peft.__version__)" 2>&1 | grep -v Warning
echo "== $(date -u) $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"

run() {  # run NAME SECONDS CMD...: log to $work/logs/NAME.log, print the exit code and the last lines
  local name=$1 limit=$2; shift 2; mkdir -p "$work/logs"; echo "== $name: $*"; local t=$SECONDS
  timeout "$limit" "$@" > "$work/logs/$name.log" 2>&1; local rc=$?
  echo "   rc=$rc in $((SECONDS - t)) s"; tail -4 "$work/logs/$name.log" | cut -c1-400
}
collect() {  # results, trainer states, evaluation metrics and logs -> OUT (a tarball: the device returns <= 8 files)
  cp "$learning/results.json" "$out/" 2>/dev/null
  (cd "$work" && tar -czf "$out/$stage-logs.tar.gz" logs $(cd "$work" && ls -d learning/logs learning/*/trainer_state.json \
    learning/*/run_summary.json learning/eval/*/metrics.json runs/*/trainer_state.json runs/*/run_summary.json \
    runs/*/*.jsonl bench/*.json 2>/dev/null))
  ls -la "$out"
}
limit=${LIMIT:-570}  # seconds for the stage's main command (a device call may run 600 s)
demo=(python3 scripts/demo_learning.py --configs configs/gpu/learning --out "$learning" --resume --no-docs)

case $stage in
  policy)  run policy "$limit" "${demo[@]}" --until eval-teacher ;;
  learn)   run learn "$limit" "${demo[@]}" --until eval-grpo-opd ;;
  control) run control "$limit" "${demo[@]}" --ablation ;;
  measure)
    [ -f "$learning/student/model.safetensors" ] || run policy-sft 400 "${demo[@]}" --until teacher
    common=(--config configs/gpu/learning/grpo-opd.yaml --model_name_or_path "$learning/student"
            --teacher_model "$learning/teacher" --max_steps 6 --seed 0)
    run mismatch-full 200 python3 scripts/train.py "${common[@]}" --output_dir "$work/runs/mismatch-full"
    run mismatch-lora 200 python3 scripts/train.py "${common[@]}" --output_dir "$work/runs/mismatch-lora" \
      --use_peft true --lora_r 16 --lora_alpha 32 --lora_target_modules all-linear --learning_rate 1e-4
    mkdir -p "$work/bench"
    [ -f benchmarks/scheduling_bench.py ] && run scheduling 240 python3 benchmarks/scheduling_bench.py \
      --model "$learning/student" --device cuda --out "$work/bench/scheduling.json"
    ;;
  8b)
    python3 scripts/build_tiny_model.py --shape qwen3-8b --out "$work/qwen3-8b" --device cuda > /dev/null
    run 8b-colocate 540 python3 scripts/train.py --config configs/qwen3-8b-1gpu-colocate.yaml \
      --model_name_or_path "$work/qwen3-8b" --output_dir "$work/runs/8b-colocate" --max_steps 3 --report_to none \
      --save_strategy no --dataset "synthetic:n=64,seed=0,difficulty=small" --max_prompt_tokens 4096
    ;;
  unsloth)
    [ -f .gpu4/README.txt ] || { echo "no .gpu4/ (unsloth wheels)"; exit 2; }
    export RUNS=${RUNS:-peft_hf unsloth_hf} RUN_TIMEOUT=${RUN_TIMEOUT:-240}
    run unsloth "$limit" \
      bash benchmarks/unsloth_gpu.sh "$learning/student" "$work/bench"
    ;;
  zero)
    bench=benchmarks/gpu_trainer_bench.py; ngpu=$(python3 -c 'import torch; print(torch.cuda.device_count())')
    small=(--shape qwen3-0.6b --seq-len 2048 --global-batch 16 --micro-batch 4 --steps 5 --gradient-checkpointing)
    big=(--shape qwen3-8b --lora --gradient-checkpointing --seq-len 4096 --global-batch 16 --micro-batch 4 --steps 3)
    mkdir -p "$work/bench"
    run bench-1gpu 300 env CUDA_VISIBLE_DEVICES=0 python3 -m accelerate.commands.launch \
      --config_file accelerate_configs/single_gpu.yaml $bench "${small[@]}" --out "$work/bench/bench_1gpu.json"
    for n in 2 4; do
      [ "$ngpu" -ge $n ] || continue
      for z in zero2 zero3; do
        run bench-${z}-x$n 300 python3 -m accelerate.commands.launch --config_file accelerate_configs/$z.yaml \
          --num_processes $n $bench "${small[@]}" --out "$work/bench/bench_${z}_x$n.json"
      done
      run bench-8b-zero3-x$n 400 python3 -m accelerate.commands.launch --config_file accelerate_configs/zero3.yaml \
        --num_processes $n $bench "${big[@]}" --out "$work/bench/bench_8b_lora_zero3_x$n.json"
    done
    ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
collect
