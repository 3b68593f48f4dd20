"""The training preflight for configs launched elsewhere: `arc-trl sweep --dry-run` and `arc-trl condor train
--dry-run` run the checks of `arc-trl train --check_config true` (config keys and values, the model's folder or hub
id and its tokenizer, the dataset, the prompts within `max_prompt_tokens`, enough prompts for a generation batch) on
each config, here and now, so that a job does not wait in a queue to fail on its first line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def preflight(config: Path, overrides: Sequence[str] = ()) -> tuple[bool, str]:
    """(passed, what it found): the number of training prompts, or the one-line error `arc-trl train` would print."""
    from arc_trl.train_entry import parse_config, prepare

    try:
        script, arc, args, model_args = parse_config(["--config", str(config), *overrides])
        _, template_choice, train_dataset, eval_dataset = prepare(script, arc, args, model_args)
    except SystemExit as stopped:  # the entry point's worded errors
        return False, str(stopped.code)
    except Exception as error:  # noqa: BLE001  one the entry point does not word: its type and message
        return False, f"{type(error).__name__}: {error}"
    held_out = f", {len(eval_dataset)} held-out" if eval_dataset is not None else ""
    return True, (f"{len(train_dataset)} training prompts{held_out} from {script.dataset}, model "
                  f"{model_args.model_name_or_path} (chat template: {template_choice})")
