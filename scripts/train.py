"""`arc-trl train` by path, as `accelerate launch` needs: train an ARC solver with GRPO (+ on-policy distillation).

    accelerate launch scripts/train.py --config configs/tiny-cpu.yaml [--key value ...]
    arc-trl train --config configs/tiny-cpu.yaml --check_config true   # one process; validate + print, no training

The YAML file is one flat mapping of `trl.GRPOConfig`, `trl.ModelConfig`, `arc_trl.config.ArcConfig` and
`arc_trl.config.script_args.ArcScriptArguments` keys; command-line flags override it. `--help` lists every key.
`--resume_from_checkpoint auto` resumes from the latest checkpoint in output_dir.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from arc_trl.train_entry import main  # noqa: E402

if __name__ == "__main__":  # the guard matters: vLLM spawns worker processes that re-import this file
    main()
