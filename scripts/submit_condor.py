#!/usr/bin/env python
"""Submit one job to HTCondor, or write its .sub file when no schedd is reachable (docs/sweeps.md).

    python scripts/submit_condor.py train --config configs/qwen3-8b-4gpu.yaml --memory 128G [-- --max_steps 100]
    python scripts/submit_condor.py evaluate --gpus 1 -- generate --model M --dataset arc-agi-1/eval \
        --n-predictions 128 --output-dir runs/eval/m

Training jobs run scripts/run_with_servers.py (vLLM servers + accelerate) with --resume, so a retried job continues
from its latest checkpoint. request_gpus defaults to vllm_gpus + trainer_gpus + teacher_gpus of the config.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without `pip install -e .`

from arc_trl.launch.single_jobs import main

if __name__ == "__main__":
    sys.exit(main())
