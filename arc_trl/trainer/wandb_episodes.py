"""A few episodes of a generation batch as a W&B table every `wandb_episodes_every_steps` optimizer steps (sparse:
images and text are heavy), in the rollout dump's record format (`rollout_dump.episode_dump`, without tokens), one
episode per GRPO group where the batch has enough (`arc_trl.view.wandb_tables.episodes_table` draws the grids)."""

from __future__ import annotations

from arc_trl.trainer.rollout_dump import episode_dump


class WandbEpisodes:
    def __init__(self, every_steps: int, count: int, group_size: int = 1) -> None:
        self.every_steps = every_steps
        self.count = count
        self.group_size = max(1, group_size)
        self.last_step: int | None = None

    def due(self, step: int) -> bool:
        return self.every_steps > 0 and self.count > 0 and step % self.every_steps == 0 and step != self.last_step

    def picks(self, n: int) -> list[int]:
        """Indices of the episodes shown: the first of each group first, then the others, `count` at most."""
        firsts = list(range(0, n, self.group_size))
        rest = [i for i in range(n) if i % self.group_size]
        return (firsts + rest)[: self.count]

    def __call__(self, trainer, episodes, rewards, advantages, reward_parts) -> bool:
        """Log the table when due, from the main process with an active W&B run; True when logged."""
        from arc_trl.view.wandb_tables import active_run, log_episodes

        step = trainer.state.global_step
        if not self.due(step) or not trainer.accelerator.is_main_process or active_run() is None:
            return False
        self.last_step = step
        records = [episode_dump(episodes[i], step, i, rewards, advantages, trainer.processing_class.decode,
                                reward_parts, tokens=False) for i in self.picks(len(episodes))]
        return log_episodes(records, step)


def default_wandb_dir(args) -> str | None:
    """Where W&B writes its `wandb/` folder: `WANDB_DIR` when set, else the run's `output_dir` (not the working
    directory). Sets `WANDB_DIR` for the W&B callback when it will report to W&B; returns the folder (None: no W&B)."""
    import os

    report_to = args.report_to if isinstance(args.report_to, (list, tuple)) else [args.report_to]
    if "wandb" not in report_to and "all" not in report_to:
        return None
    if not os.environ.get("WANDB_DIR"):
        os.makedirs(args.output_dir, exist_ok=True)
        os.environ["WANDB_DIR"] = os.path.abspath(args.output_dir)
    return os.environ["WANDB_DIR"]
