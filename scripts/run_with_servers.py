#!/usr/bin/env python
"""Run a training config with the vLLM servers it needs, each on its own slice of the job's GPUs.

    python scripts/run_with_servers.py --config configs/qwen3-8b-4gpu.yaml            # run
    python scripts/run_with_servers.py --config configs/qwen3-8b-4gpu.yaml --dry-run  # show the plan only
    python scripts/run_with_servers.py --config X.yaml -- --max_steps 10              # extra scripts/train.py args

GPU split keys of the config (docs/sweeps.md): vllm_gpus (student `trl vllm-serve`, when use_vllm: true and
vllm_mode: server), trainer_gpus (accelerate processes), teacher_gpus (`vllm serve teacher_model`, when
teacher_backend: server), assigned in that order. Servers are stopped at the end, on failure and on SIGTERM/Ctrl-C.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without `pip install -e .`

from arc_trl.launch.server_runner import main

if __name__ == "__main__":
    sys.exit(main())
