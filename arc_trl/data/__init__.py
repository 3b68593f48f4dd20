"""ARC data: the task model, loaders, validation, augmentation, prompts and datasets.

`datasets` is imported lazily (inside `build_dataset`), so `import arc_trl.data` stays light. Tasks are loaded with
`arc_trl.load_tasks` (`arc_trl.tasks`: every spec, generated curricula included), which sits above this package.
"""

from arc_trl.data.augment import DIHEDRAL_NAMES, Augmentation, random_augmentation, split_task_id
from arc_trl.data.dataset import (
    PromptLengthReport,
    build_dataset,
    expand_tasks,
    prompt_length_report,
    task_from_json_string,
    task_to_json_string,
)
from arc_trl.data.grid_format import format_grid, grid_shape, parse_grid
from arc_trl.data.loaders import (
    BUNDLED_DATASETS,
    list_bundled,
    save_kaggle,
    save_tasks_folder,
)
from arc_trl.data.prompts import PromptTemplate, default_template, load_template, render_messages
from arc_trl.data.task import ArcTask, Grid, Pair, TaskValidationError, is_valid_grid, normalize_grid

__all__ = [
    "BUNDLED_DATASETS",
    "DIHEDRAL_NAMES",
    "ArcTask",
    "Augmentation",
    "Grid",
    "Pair",
    "PromptLengthReport",
    "PromptTemplate",
    "TaskValidationError",
    "build_dataset",
    "default_template",
    "expand_tasks",
    "format_grid",
    "grid_shape",
    "is_valid_grid",
    "list_bundled",
    "load_template",
    "normalize_grid",
    "parse_grid",
    "prompt_length_report",
    "random_augmentation",
    "render_messages",
    "save_kaggle",
    "save_tasks_folder",
    "split_task_id",
    "task_from_json_string",
    "task_to_json_string",
]
