"""The trainer: `ArcGRPOTrainer` (GRPO + ARC REPL rollout + on-policy distillation)."""

from arc_trl.trainer.arc_grpo_trainer import ArcGRPOTrainer
from arc_trl.trainer.loss_mask import EmptyLossMaskError

__all__ = ["ArcGRPOTrainer", "EmptyLossMaskError"]
