"""arc-trl: fine-tune LLMs into ARC-AGI solvers with GRPO + on-policy distillation, on top of Hugging Face TRL."""

__version__ = "0.1.0"
