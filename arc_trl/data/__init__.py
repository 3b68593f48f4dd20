"""ARC data: the task model, loaders, validation, augmentation, prompts and datasets."""

from arc_trl.data.task import ArcTask, Grid, Pair, TaskValidationError, is_valid_grid, normalize_grid

__all__ = ["ArcTask", "Grid", "Pair", "TaskValidationError", "is_valid_grid", "normalize_grid"]
