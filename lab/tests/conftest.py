"""The lab's tests: the experiments (arc_experiments), their GPU-machine tooling and the committed results they read.
`make test` runs them with the product's suite (`pytest tests lab/tests`: tests/conftest.py's test order applies to
both); alone, `pytest lab/tests` runs them from the checkout's root. They use no fixture of tests/conftest.py, only
its environment."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "offline")
