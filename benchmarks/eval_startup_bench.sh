#!/bin/bash
# vLLM start-up of `evaluate.py generate` for checkpoints of one architecture evaluated one after the other
# (docs/benchmarks.md, "Evaluation start-up"): for each tree (BEFORE, AFTER: checkouts), with fresh caches, evaluate
# M1, then M2, then M1 again, each in its own process, and print each one's wall time and the path vLLM was given.
#   BEFORE=/tmp/before AFTER=$PWD M1=model_a M2=model_b TASKS=tasks_folder bash benchmarks/eval_startup_bench.sh
set -u
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} TOKENIZERS_PARALLELISM=false
py=${PYTHON:-python3}; work=$(mktemp -d)
for tree in before after; do
  root=$BEFORE; [ "$tree" = after ] && root=$AFTER
  export VLLM_CACHE_ROOT=$work/cache-$tree ARC_TRL_MODEL_ALIAS_DIR=$work/alias-$tree
  for m in "$M1" "$M2" "$M1"; do
    t=$(date +%s%N); log=$work/log-$tree-$RANDOM.txt
    $py -m arc_trl evaluate generate --model "$m" --dataset "$TASKS" --n-predictions 1 \
      --output-dir "$work/out-$RANDOM" --seed 0 --max-turns 1 --max-tokens-per-turn 16 --max-completion-length 64 \
      --workers 1 --no-progress > "$log" 2>&1
    rc=$?
    ms=$((($(date +%s%N) - t) / 1000000))
    printf "%s %s rc=%s wall=%d.%01d s; vLLM got %s\n" "$tree" "$(basename "$m")" "$rc" $((ms / 1000)) \
      $((ms % 1000 / 100)) "$(grep -o "model='[^']*'" "$log" | head -1)"
  done
done
rm -rf "$work"
