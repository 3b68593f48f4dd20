#!/usr/bin/env bash
# The GPU runs behind docs/learning.md ("GPU"), docs/benchmarks.md ("GPU") and docs/memory.md, on one GPU machine.
#
# The GPU machines have Python 3.12 + torch 2.11 and nothing else we need; vLLM 0.26 (the release that pins torch 2.11)
# + TRL 1.16 come as the bundle of ../shared/gpu-bundle/build.sh, three parts of <= 56 MiB copied into the
# git-ignored folders .gpu1/ .gpu2/ .gpu3/ (each call may carry 64 MiB). Back to back on one warm machine:
#   call 1 (carry .gpu1):  bash benchmarks/gpu_runs.sh stash .gpu1
#   call 2 (carry .gpu2):  bash benchmarks/gpu_runs.sh stash .gpu2
#   call 3 (carry .gpu3):  bash benchmarks/gpu_runs.sh bg $OUT learning unsloth   # unpacks, starts the queue, watches
#   later calls:           bash benchmarks/gpu_runs.sh watch $OUT                 # until done or LIMIT s; collects
# A device call lasts at most 10 minutes, so the long stages run as a background queue (`bg OUT STAGE...`, one after
# another) that outlives the call; each `watch` call waits for it up to LIMIT seconds and brings back what is
# finished (OUT: results.json and a tarball of logs, trainer states, metrics and GPU memory samples). A stage may also
# run in the foreground: `bash benchmarks/gpu_runs.sh STAGE $OUT` (each fits one call, except learning and 8b).
# Stages:
#   learning the whole experiment of configs/gpu/learning/profile.yaml (scripts/demo_learning.py --list: policy,
#            teachers, held-out evaluations, GRPO + OPD and GRPO alone for each seed; ~75-80 min on an H100, so it is
#            split over machines with --only/--with-needs and merged with --report). One stage at a time: vLLM 0.26
#            counts other processes' memory against its budget.
#   learn    the same stages as learning; control: the GRPO-only arm of seed SEED (default 0) and its evaluations,
#            with what it needs (model, student)
#   policy   only the policy and its evaluations (the first stages of `learning`)
#   mismatch trainer/vLLM mismatch with LoRA, and with token-level IS correction (the full fine-tune is `learning`)
#   scheduling  lock-step vs per-episode rollouts vs the continuous-batch floor (benchmarks/scheduling_bench.py)
#   8b       configs/qwen3-8b-1gpu-colocate.yaml (LoRA, sleep mode, 6 turns x 768 tokens) on an 8B-shaped model with
#            benchmark_full_turns (every turn runs to its cap): peak memory and step parts at the config's lengths
#   unsloth  unsloth vs plain PEFT on the student (needs unsloth's wheels and bitsandbytes: `stash .gpu4` and
#            `stash .gpu5` calls before, see .gpu4/README.txt; builds the student first if it is missing)
#   zero     trainer benchmark (gpu_trainer_bench.py, Qwen3-0.6B and 8B LoRA shapes) on 1 GPU and, where the
#            machine has them, DeepSpeed ZeRO-2/3 on 2 and 4 GPUs (needs deepspeed: EXTRA="deepspeed==0.19.8")
#   collapse the collapse guard on the 0.6B policy (docs/collapse.md, GPU): the step-2 collapse of lr 1e-4 with the
#            default guard, rollback acting on it, a provoked collapse with and without rollback (peak memory)
#   collapse8b  one provoked rollback of the 8B one-GPU recipe (peak memory, time to recover)
#   teachers the privileged teacher, the student and the teacher's teacher_kl (demo_learning stages, ONLY=...)
#   seedpair both arms of training seed SEED from this machine's student, each evaluation beside the next run
#   sweep    the validation sweep of configs/gpu/learning/sweep.yaml (student and privileged teacher first)
#   pieces   the stages ONLY=... of the experiment with what they need (one machine's share of `learning`)
#   speed    issue 25's before/after: profile_step.py on the 0.6B learning step (and SPEED_8B=1: the 8B recipe) for
#            the tree in .baseline/ (the commit before the change), then this one
#   profile  benchmarks/profile_step.py on the 0.6B learning step for same-loss config variants (VARIANTS=...)
# Back here: python scripts/demo_learning.py --configs configs/gpu/learning --report RESULTS_JSON rewrites the docs.
set -uo pipefail
stage=${1:?stage}; out=${2:?output dir or folder}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled NCCL_NVLS_ENABLE=0 VLLM_USE_FLASHINFER_SAMPLER=0
work=/tmp/arc-gpu; learning=$work/learning; queue=$work/queue; mkdir -p "$work/logs" "$work/bench" "$queue"

if [ "$stage" = stash ]; then  # keep what a call carried on the machine: a part of the bundle, or unsloth's wheels
  if ls "$out"/*.whl > /dev/null 2>&1; then mkdir -p /tmp/wheels && cp "$out"/* /tmp/wheels/ && ls /tmp/wheels; exit; fi
  mkdir -p /tmp/stash && cp "$out"/part.* /tmp/stash/ && ls -la /tmp/stash; exit
fi
mkdir -p "$out"
if [ ! -d /tmp/site/vllm ]; then  # needs the call that carries .gpu3
  if ! ls /tmp/stash/part.* .gpu3/part.* >/dev/null 2>&1; then echo "no vLLM bundle: run the stash calls first"; exit 2; fi
  mkdir -p /tmp/site && cat /tmp/stash/part.* .gpu3/part.* | xz -d -T8 | tar -x -C /tmp/site || exit 2
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH

collect() {  # results, trainer states, evaluation metrics, logs and GPU memory samples -> OUT (the device returns <= 8 files)
  cp "$learning/results.json" "$out/" 2>/dev/null
  (cd "$work" && tar -czf "$out/$1-logs.tar.gz" logs queue/log $(ls -d learning/logs learning/results.json \
    learning/*/trainer_state.json learning/*/run_summary.json learning/eval/*/metrics.json learning/sweep/*.json \
    learning/sweep/*/trainer_state.json learning/sweep/*/run_summary.json learning/sweep/*/eval_arc/*.jsonl \
    learning/eval/*/completions.jsonl learning/eval/*/per_attempt.jsonl runs/*/trainer_state.json \
    runs/*/run_summary.json runs/*/*.jsonl bench \
    2>/dev/null))
  ls -la "$out"
}

if [ "$stage" = bg ] || [ "$stage" = watch ]; then
  if [ "$stage" = bg ]; then  # start the queue (unless it is running): its stages run one after another, detached
    shift 2
    if [ -f "$queue/pid" ] && kill -0 "$(cat "$queue/pid")" 2>/dev/null; then echo "the queue is running already"
    elif [ $# -eq 0 ]; then echo "bg OUT STAGE...: name the stages"; exit 2
    else
      setsid nohup nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -lms 1000 \
        > "$work/logs/gpu_memory.csv" 2>&1 < /dev/null &
      printf '%s\n' "$@" > "$queue/stages"
      setsid nohup env -u LIMIT bash -c 'for s in $(cat "$1/stages"); do echo "== $(date -u +%T) $s"
          bash benchmarks/gpu_runs.sh "$s" "$1/out-$s" > "$1/$s.out" 2>&1; echo "== $(date -u +%T) $s rc=$?"
        done; echo "== queue done"' _ "$queue" > "$queue/log" 2>&1 < /dev/null &
      echo $! > "$queue/pid"; echo "queue started: $*"
    fi
  fi
  deadline=$((SECONDS + ${LIMIT:-560})); last=""; until=${UNTIL:-queue done}  # UNTIL=STAGE: return once it ends
  while [ $SECONDS -lt $deadline ] && ! grep -qE "queue done|$until rc=" "$queue/log" 2>/dev/null; do
    now=$(cat "$queue/log" "$work/logs/learning.log" 2>/dev/null | grep -E '^(==|\[demo\])' | tail -1)
    [ "$now" != "$last" ] && { echo "$(date -u +%T) $now" | cut -c1-220; last=$now; }
    sleep 10
  done
  echo "---- queue"; cat "$queue/log"; for f in "$queue"/*.out; do [ -f "$f" ] && { echo "---- $f"; tail -12 "$f" | cut -c1-400; }; done
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
  collect queue; exit
fi

python3 -c "import torch, vllm, trl, transformers, peft; print('torch', torch.__version__, '| vllm', vllm.__version__,
'| trl', trl.__version__, '| transformers', transformers.__version__, '| peft', peft.__version__)" 2>&1 | grep -v Warning
echo "== $(date -u) $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"

run() {  # run NAME SECONDS CMD...: log to $work/logs/NAME.log, print the exit code and the last lines
  local name=$1 limit=$2; shift 2; echo "== $name: $*"; local t=$SECONDS
  timeout "$limit" "$@" > "$work/logs/$name.log" 2>&1; local rc=$?
  echo "   rc=$rc in $((SECONDS - t)) s"; tail -4 "$work/logs/$name.log" | cut -c1-400
}
first_step() {  # first_step LOG PID: wait until the training run PID has logged a step (its vLLM is up), or ended
  local t=$SECONDS
  until grep -qs "'reward'" "$1" || ! kill -0 "$2" 2>/dev/null || [ $((SECONDS - t)) -gt 400 ]; do sleep 5; done
}
limit=${LIMIT:-570}  # seconds for the stage's main command (a device call may run 600 s; the queue allows more)
demo=(python3 scripts/demo_learning.py --configs configs/gpu/learning --out "$learning" --resume --no-docs)

case $stage in
  learning) run learning "${LIMIT:-3000}" "${demo[@]}" ;;
  policy)   run policy "$limit" "${demo[@]}" --until eval-teacher ;;
  student)  run student "$limit" "${demo[@]}" --until student ;;
  learn)    run learn "${LIMIT:-3000}" "${demo[@]}" ;;               # learning without the control, one stage at a time
  control)  run control "${LIMIT:-3000}" "${demo[@]}" --only "grpo-only-s${SEED:-0},eval-grpo-only-s${SEED:-0}*" --with-needs ;;
  mismatch)  # LoRA beside the full fine-tune of `learn`, and token-level IS beside TRL's sequence-level default
    [ -f "$learning/student/model.safetensors" ] || run policy-sft "$limit" "${demo[@]}" --until teacher
    common=(--config configs/gpu/learning/grpo-opd.yaml --model_name_or_path "$learning/student"
            --teacher_model "$learning/teacher" --max_steps ${STEPS:-6} --seed 0)
    run mismatch-lora 280 python3 scripts/train.py "${common[@]}" --output_dir "$work/runs/mismatch-lora" \
      --use_peft true --lora_r 16 --lora_alpha 32 --lora_target_modules all-linear --learning_rate 1e-4
    run mismatch-token 280 python3 scripts/train.py "${common[@]}" --output_dir "$work/runs/mismatch-token" \
      --vllm_importance_sampling_mode token_truncate
    ;;
  scheduling)  # lock-step vs per-episode vs the continuous-batch floor, the policy on held-out synthetic tasks
    mkdir -p "$work/bench"
    run scheduling "$limit" python3 benchmarks/scheduling_bench.py --model "$learning/student" --mean-turn-tokens 0 \
      --dataset "synthetic:n=256,seed=1,difficulty=tiny,families=rotate+flip+transpose+mirror_concat+upscale+color_swap" \
      --prompt-template configs/demo/prompt.yaml --episodes ${EPISODES:-64} --max-turns 3 --tokens-per-turn 256 \
      --max-completion-length 768 --dtype bfloat16 --gpu-memory-utilization 0.3 --sandbox-workers 8 --repeats 2 \
      --out "$work/bench/scheduling.json"
    ;;
  8b)  # the config as written (ARC-AGI-1 training tasks, 6 turns x 768 tokens, 3072-token episodes, prompts up to
    # 4096 tokens); a random 8B shape writes no code, so benchmark_full_turns makes every turn run to its cap
    python3 scripts/build_tiny_model.py --shape qwen3-8b --out "$work/qwen3-8b" --device cuda > /dev/null
    train_8b() {  # train_8b NAME [EXTRA ARGS...]
      local name=$1; shift
      run "$name" "${LIMIT:-900}" python3 scripts/train.py --config configs/qwen3-8b-1gpu-colocate.yaml \
        --model_name_or_path "$work/qwen3-8b" --output_dir "$work/runs/$name" --max_steps "${STEPS:-3}" \
        --report_to none --save_strategy no --benchmark_full_turns true --collapse_guard off --seed 0 "$@"
    }
    train_8b 8b-colocate
    if [ ! -f "$work/runs/8b-colocate/run_summary.json" ]; then  # e.g. out of memory: the same batch in smaller pieces
      train_8b 8b-colocate-mb4 --per_device_train_batch_size 4 --gradient_accumulation_steps 8
    fi
    ;;
  unsloth)  # the wheels: .gpu4/ carried by this call, or stashed by an earlier one (`stash .gpu4`)
    export WHEELS=${WHEELS:-$( [ -f .gpu4/README.txt ] && echo .gpu4 || echo /tmp/wheels )}
    ls "$WHEELS"/unsloth-*.whl > /dev/null 2>&1 || { echo "no unsloth wheels in .gpu4/ or /tmp/wheels"; exit 2; }
    [ -f "$learning/student/model.safetensors" ] || run student "$limit" "${demo[@]}" --until student
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
  collapse)  # issue 24 on the 0.6B policy, GRPO only (docs/collapse.md "GPU measurements")
    [ -f "$learning/student/model.safetensors" ] || run student "$limit" "${demo[@]}" --until student
    common=(--config configs/gpu/learning/grpo-opd.yaml --model_name_or_path "$learning/student" --teacher_backend none --teacher_tau 0
            --seed 0)
    # 1. the step-2 collapse of lr 1e-4, guard at its defaults (warn): labelled, and (2.) acted on by rollback
    run collapse-early-warn 300 python3 scripts/train.py "${common[@]}" --learning_rate 1e-4 --max_steps 5 \
      --output_dir "$work/runs/collapse-early-warn"
    run collapse-early-rollback 420 python3 scripts/train.py "${common[@]}" --learning_rate 1e-4 --max_steps 12 \
      --collapse_guard rollback --save_strategy steps --save_steps 2 --output_dir "$work/runs/collapse-early-rollback"
    # 3. the provoked collapse of the issue, peak device memory with a rollback and without one
    provoked=(--learning_rate 1.0 --weight_decay 1.0 --warmup_steps 3 --collapse_baseline_steps 3 --collapse_window 1
              --save_strategy steps --save_steps 1 --save_total_limit 2 --max_steps 6)
    run collapse-provoked-warn 300 python3 scripts/train.py "${common[@]}" "${provoked[@]}" --collapse_guard warn \
      --output_dir "$work/runs/collapse-provoked-warn"
    run collapse-provoked-rollback 400 python3 scripts/train.py "${common[@]}" "${provoked[@]}" \
      --collapse_guard rollback --output_dir "$work/runs/collapse-provoked-rollback"
    for r in collapse-early-warn collapse-early-rollback collapse-provoked-warn collapse-provoked-rollback; do
      echo "-- $r"; grep -E "collapse-guard|mean step" "$work/logs/$r.log" | cut -c1-300 | tail -8
      cp "$work/runs/$r/collapse_guard.jsonl" "$work/bench/$r.guard.jsonl" 2>/dev/null
    done
    ;;
  collapse8b)  # issue 24: one provoked rollback of the 8B one-GPU recipe (forced full turns, as the 8b stage): the
    # rule below fires when the warm-up raises the learning rate at step 2; one rollback, then the guard stops
    [ -d "$work/qwen3-8b" ] || python3 scripts/build_tiny_model.py --shape qwen3-8b --out "$work/qwen3-8b" --device cuda > /dev/null
    run collapse-8b-rollback "${LIMIT:-900}" python3 scripts/train.py --config configs/qwen3-8b-1gpu-colocate.yaml \
      --model_name_or_path "$work/qwen3-8b" --output_dir "$work/runs/collapse-8b-rollback" --max_steps 4 \
      --report_to none --benchmark_full_turns true --seed 0 --save_strategy steps --save_steps 1 \
      --collapse_guard rollback --collapse_max_rollbacks 1 --collapse_baseline_steps 1 --collapse_window 1 \
      --collapse_min_signals 1 --collapse_thresholds '{"learning_rate:up": {"change": "delta", "warn": 1e-12, "collapse": 1e-12}}'
    grep -E "collapse-guard|mean step|STOPPED" "$work/logs/collapse-8b-rollback.log" | cut -c1-300 | tail -8
    cp "$work/runs/collapse-8b-rollback/collapse_guard.jsonl" "$work/bench/collapse-8b.guard.jsonl" 2>/dev/null
    ;;
  teachers)  # issue 26 item 1: the privileged teacher (and the student) on the held-out tasks, its teacher_kl
    run teachers "${LIMIT:-3000}" "${demo[@]}" \
      --only "${ONLY:-teacher-privileged,eval-student,eval-teacher-privileged,kl-teacher-privileged}" --with-needs
    ;;
  speed)  # issue 25: the step before and after the speed changes, one right after the other on this machine: the
    # tree of the commit before them (.baseline/, a git archive carried by the call: see docs/benchmarks.md) and
    # this one. 0.6B learning step from the student (teacher: the student's weights, the learning rate of the
    # baseline config in both); with SPEED_8B=1 also the 8B recipe (random-init 8B shape, benchmark_full_turns)
    [ -d .baseline/arc_trl ] || { echo "no .baseline/ tree (git archive COMMIT | tar -x -C .baseline)"; exit 2; }
    [ -f "$learning/student/model.safetensors" ] || run student "$limit" "${demo[@]}" --until student
    for tree in ${TREES:-baseline after}; do
      dir=$PWD; [ "$tree" = baseline ] && dir=$PWD/.baseline
      run "speed-06-$tree" 300 env -C "$dir" PYTHONPATH="/tmp/site:$dir" python3 benchmarks/profile_step.py \
        --out "$work/bench/speed_06_$tree.json" -- --config configs/gpu/learning/grpo-opd.yaml \
        --model_name_or_path "$learning/student" --teacher_model "$learning/student" --max_steps "${STEPS:-6}" \
        --seed 0 --collapse_guard off --learning_rate 1e-5 --output_dir "$work/runs/speed-06-$tree"
      grep -A24 "^sub-phases" "$work/logs/speed-06-$tree.log" | grep -v rank0
      # the sandbox's part of a lock-step batch alone (docs/benchmarks.md, Sandbox), on this machine's cores
      python3 benchmarks/lockstep_sandbox_bench.py --code-root "$dir" | tee "$work/bench/sandbox_lockstep_$tree.txt"
    done
    if [ -n "${SPEED_8B:-}" ]; then
      [ -d "$work/qwen3-8b" ] || python3 scripts/build_tiny_model.py --shape qwen3-8b --out "$work/qwen3-8b" --device cuda > /dev/null
      for tree in ${TREES:-baseline after}; do
        dir=$PWD; [ "$tree" = baseline ] && dir=$PWD/.baseline
        run "speed-8b-$tree" 900 env -C "$dir" PYTHONPATH="/tmp/site:$dir" python3 benchmarks/profile_step.py \
          --out "$work/bench/speed_8b_$tree.json" -- --config configs/qwen3-8b-1gpu-colocate.yaml \
          --model_name_or_path "$work/qwen3-8b" --output_dir "$work/runs/speed-8b-$tree" --max_steps 3 \
          --report_to none --save_strategy no --benchmark_full_turns true --collapse_guard off --seed 0
        grep -A24 "^sub-phases" "$work/logs/speed-8b-$tree.log" | grep -v rank0
      done
    fi
    ;;
  seedpair)  # issue 26: both arms of training seed SEED (default 1) from this machine's student and privileged teacher,
    # with each held-out evaluation beside the next RL run (a second vLLM at 0.25 of the GPU: a run holds ~34 GiB)
    s=${SEED:-1}; side=$work/configs-side; rm -rf "$side"; cp -r configs/gpu/learning "$side"
    sed -i -e '/^eval_args:/s/"0.6"/"0.25"/' -e '/^eval_args:/s/"16"/"8"/' "$side/profile.yaml"
    grep -q '^eval_args:.*"0.25"' "$side/profile.yaml" || { echo "seedpair: eval_args of profile.yaml changed: mend the sed"; exit 2; }
    run shared "$limit" "${demo[@]}" --only "${SHARED:-teacher-privileged}" --with-needs
    beside() {  # beside RUN EVAL: RUN in the background; EVAL once RUN has logged its first step (its vLLM is up)
      "${demo[@]}" --only "$1" > "$work/logs/$1.out" 2>&1 & local pid=$! t=$SECONDS
      first_step "$learning/logs/$1.log" $pid
      run "$2" "$limit" python3 scripts/demo_learning.py --configs "$side" --out "$learning" --resume --no-docs --only "$2"
      wait $pid; echo "   $1 rc=$? in $((SECONDS - t)) s"; tail -2 "$work/logs/$1.out" | cut -c1-300
    }
    beside "grpo-opd-s$s" eval-student
    beside "grpo-only-s$s" "eval-grpo-opd-s$s"
    run "eval-grpo-only-s$s" "$limit" "${demo[@]}" --only "eval-grpo-only-s$s"
    ;;
  sweep)  # issue 26 item 2: configs/gpu/learning/sweep.yaml (GRPO + OPD from this machine's student and privileged
    # teacher, each run scored on the validation tasks in training), two runs at a time (each holds ~34 GiB; the next
    # starts once the one before has logged its first step), ranked by arc_experiments.learning.sweep_choice
    run shared "$limit" "${demo[@]}" --only teacher-privileged --with-needs
    python3 scripts/sweep.py configs/gpu/learning/sweep.yaml --dry-run --command "python3 scripts/train.py"
    pids=()
    for config in "$learning"/sweep/*/config.yaml; do
      name=$(basename "$(dirname "$config")"); echo "== $(date -u +%T) sweep run $name"
      python3 scripts/train.py --config "$config" > "$work/logs/sweep-$name.log" 2>&1 & pids+=($!)
      first_step "$work/logs/sweep-$name.log" $!
      if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
    done
    wait
    run sweep-choice 300 python3 -m arc_experiments.learning.sweep_choice "$learning/sweep" --out "$learning/sweep/choice.json"
    cat "$work/logs/sweep-choice.log"
    ;;
  pieces)  # issue 26: some stages of the experiment (ONLY=comma-separated patterns) with what they need
    run pieces "${LIMIT:-3000}" "${demo[@]}" --only "${ONLY:?ONLY=stage patterns}" --with-needs
    ;;
  profile)  # issue 25: sub-phase profile of the 0.6B learning step (benchmarks/profile_step.py) for config variants
    # that leave the loss unchanged (micro-batch size, sandbox workers, teacher batch, scheduling); the teacher is the
    # student's weights (the same forwards as a separate teacher of that shape)
    [ -f "$learning/student/model.safetensors" ] || run student "$limit" "${demo[@]}" --until student
    steps=${STEPS:-6}
    for v in ${VARIANTS:-base mb32 mb64 mb32_sw16_tb32 mb32_sw16_tb32_pe}; do
      extra=()
      case $v in *mb32*) extra+=(--per_device_train_batch_size 32 --gradient_accumulation_steps 2) ;; esac
      case $v in *mb64*) extra+=(--per_device_train_batch_size 64 --gradient_accumulation_steps 1) ;; esac
      case $v in *sw16*) extra+=(--sandbox_workers 16) ;; esac
      case $v in *tb32*) extra+=(--teacher_batch_size 32) ;; esac
      case $v in *_pe*) extra+=(--rollout_scheduling per_episode) ;; esac
      case $v in *nois*) extra+=(--vllm_importance_sampling_correction false) ;; esac
      run "prof-$v" "${PROFILE_LIMIT:-300}" python3 benchmarks/profile_step.py --out "$work/bench/profile_$v.json" \
        --torch-profile-step "$steps" -- --config configs/gpu/learning/grpo-opd.yaml \
        --model_name_or_path "$learning/student" --teacher_model "$learning/student" --max_steps "$steps" --seed 0 \
        --collapse_guard off --output_dir "$work/runs/prof-$v" "${extra[@]}"
      grep -A30 "^sub-phases" "$work/logs/prof-$v.log" | head -40
    done
    ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
collect "$stage"
