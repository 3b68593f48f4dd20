#!/usr/bin/env bash
# The code-model experiment (python -m arc_experiments.coder) on a one-GPU machine reached through calls that each
# carry <= 64 MiB: the GPU bundle (shared/gpu-bundle/build.sh) and the models' wheels travel as ferry chunks, one a
# call, while the queue runs detached from a copy of the checkout (a call re-lays the working tree).
#   here, once:   python3 lab/gpu_box/ferry.py pack .gpu BUNDLE_DIR [CARRY_DIR] WHEELS_05_DIR WHEELS_15_DIR
#                 (BUNDLE_DIR holds part.00.., named bundle/; CARRY_DIR, named carry/, *.tar files an earlier machine's
#                 collect-model sent back; the wheel folders named wheels/; in this order)
#   each call:    bash lab/gpu_box/coder.sh stash .gpu/NNN [start|status|collect $OUT]   (carry .gpu/NNN)
#     start:      once the bundle (and carry/) are whole (ferry.py assemble says so): unpack the bundle,
#                 copy the checkout to /tmp/arc-src, start the queue (it assembles later chunks itself); ONLY=a,b
#                 runs only those stages (python -m arc_experiments.coder list); results/coder/choice.json, when
#                 committed, stands for the 0.5B's harness arms; results/coder/carry/*.tar.gz (whole folders an
#                 earlier machine generated, e.g. the 1.5B's zero-shot train folder that its warm start reads) are
#                 unpacked into the work folder first
#     status:     the queue's progress lines and the GPU's memory
#     collect:    the records (no weights) packed into $OUT (<= 4 parts of 15 MiB) and the queue's log
#     collect-model $OUT MODEL K: call K's 4 parts of the warm-started MODEL's LoRA adapter (python -m
#                 arc_experiments.coder pack-model); here `cat warm-MODEL-model.tar.part* > CARRY_DIR/warm-MODEL-model.tar`
#   lanes:        LANE=b ONLY=... bash lab/gpu_box/coder.sh start   a second queue beside the first, same work folder
#                 (its own pid and log; PATIENT=SECONDS, default 1800, it waits for what the other lane makes; a warm
#                 start being made by one lane is waited for by the other); status and collect see every lane
#   deadline S:   every GRPO run started from now on ends S seconds after this machine's first stash (WORK/deadline,
#                 read by each run as it starts: arc_experiments/coder/grpo.py's --max_train_seconds); the first call
#                 comes ~60 s after the machine started, so S = 1600 leaves the last collect ~140 s of a 30-min machine
#   budget S:     every GRPO run trains S seconds (the arms at equal time; cut to what the deadline leaves)
# Make the calls back to back: an idle machine is taken back ~30 s after a call ends, and the queue with it.
set -uo pipefail
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0
FERRY=/tmp/ferry-out WORK=/tmp/coder SRC=/tmp/arc-src
lane=${LANE:+-$LANE}  # "" (the first queue) or -NAME
while [ $# -gt 0 ]; do
  case "$1" in
    stash) [ -f /tmp/ferry-t0 ] || date +%s > /tmp/ferry-t0  # the machine's first call: `deadline` counts from it
      python3 lab/gpu_box/ferry.py stash "$2" | tail -1; shift 2 ;;
    budget) mkdir -p $WORK && echo "${2:?budget S}" > $WORK/.train_seconds && mv $WORK/.train_seconds $WORK/train_seconds
      echo "budget: each GRPO run trains $2 s"; shift 2 ;;
    deadline) t0=$(cat /tmp/ferry-t0 2>/dev/null) || { echo "deadline: no stash on this machine yet"; exit 2; }
      mkdir -p $WORK && echo $(( t0 + ${2:?deadline S} )) > $WORK/.deadline && mv $WORK/.deadline $WORK/deadline
      echo "deadline: $(date -d @"$(cat $WORK/deadline)" +%T) ($(( $(cat $WORK/deadline) - $(date +%s) )) s from now)"
      shift 2 ;;
    start)
      python3 lab/gpu_box/ferry.py assemble $FERRY > /tmp/assemble.txt; head -3 /tmp/assemble.txt
      if grep -qE "waiting: (bundle|carry)/" /tmp/assemble.txt || ! ls $FERRY/bundle/part.* > /dev/null 2>&1; then
        echo "start: the bundle (or carry/) is not whole yet"; exit 2; fi
      if [ ! -d /tmp/site/vllm ]; then mkdir -p /tmp/site && cat $FERRY/bundle/part.* | xz -d -T8 | tar -x -C /tmp/site \
        || exit 2; fi
      if [ -n "$lane" ] && [ -z "${ONLY:-}" ]; then echo "start: a lane runs its own stages: LANE=$LANE needs ONLY="
        exit 2; fi
      if [ -f $WORK/pid$lane ] && kill -0 "$(cat $WORK/pid$lane)" 2>/dev/null; then echo "start: the queue runs already"
      else
        running=0; for p in $WORK/pid*; do [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null && running=1; done
        mkdir -p $SRC $WORK  # a fresh copy unless a lane runs from it (its code stays as it started)
        [ $running = 1 ] || tar --exclude=./.gpu -cf - . | tar -x -C $SRC
        for t in results/coder/carry/*.tar.gz; do  # folders an earlier machine made (full, unslimmed): not redone
          [ -f "$t" ] && tar -xzf "$t" -C $WORK --skip-old-files && echo "start: $t unpacked into $WORK"; done
        for t in $FERRY/carry/*.tar; do  # e.g. warm/qwen15/model (an adapter collect-model sent back): not retrained
          [ -f "$t" ] && tar -xf "$t" -C $WORK --skip-old-files && echo "start: $t unpacked into $WORK"; done
        here=$PWD; cd $SRC; export PYTHONPATH=/tmp/site:$SRC/lab:$SRC PATH=/tmp/site/bin:$PATH
        choice=""; [ -f results/coder/choice.json ] && choice="--choice $SRC/results/coder/choice.json"  # measured once
        only=""; [ -n "${ONLY:-}" ] && only="--only $ONLY"  # e.g. ONLY=import-qwen05,zero-shot-qwen05,warm-qwen05
        patient="--patient ${PATIENT:-1800}"  # another lane may be making what a stage here needs
        setsid nohup python3 -m arc_experiments.coder run --work $WORK --wheels $FERRY/wheels $choice $only $patient \
          --assemble "python3 $SRC/lab/gpu_box/ferry.py assemble $FERRY" > $WORK/queue$lane.log 2>&1 < /dev/null &
        echo $! > $WORK/pid$lane; disown; cd "$here"
        echo "start: queue$lane started (pid $(cat $WORK/pid$lane))"
      fi
      shift ;;
    status)
      for log in $WORK/queue*.log; do [ -f "$log" ] || continue; name=$(basename "$log" .log)
        grep -E '^[0-9]{2}:[0-9]{2}:[0-9]{2} ' "$log" | tail -8 | cut -c1-200 | sed "s/^/$name /"
        kill -0 "$(cat $WORK/pid${name#queue} 2>/dev/null)" 2>/dev/null && echo "($name running)" || echo "($name ended)"
      done
      nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader; shift ;;
    collect)
      out=$2; mkdir -p "$out"
      (cd $SRC && PYTHONPATH=/tmp/site:$SRC/lab:$SRC python3 -m arc_experiments.coder pack --work $WORK --out "$out")
      for log in $WORK/queue*.log; do [ -f "$log" ] && grep -E '^[0-9]{2}:[0-9]{2}:[0-9]{2} ' "$log" \
        > "$out/$(basename "$log" .log)-lines.log"; done; ls -la "$out"
      shift 2 ;;
    collect-model)
      (cd $SRC && PYTHONPATH=/tmp/site:$SRC/lab:$SRC python3 -m arc_experiments.coder pack-model --work $WORK --model "$3" \
        --out "$2" --call "$4"); ls -la "$2"; shift 4 ;;
    *) echo "unknown verb $1"; exit 2 ;;
  esac
done
