"""Real code models on real ARC: Qwen2.5-Coder-0.5B/1.5B-Instruct from PyPI in the harness, zero-shot and
warm-started, on ARC-AGI-1 (docs/pretrained.md). `python -m arc_experiments.coder --help`."""
