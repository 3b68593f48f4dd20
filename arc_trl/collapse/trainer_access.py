"""The collapse guard's only uses of private trainer members (TRL's and transformers'), kept in one place so that they
can move to the project's TRL/vLLM adapter module together. Nothing else in arc_trl/collapse/ touches a private member.
"""

from __future__ import annotations


def reset_generation_state(trainer) -> None:
    """After a rollback loaded a checkpoint into this trainer: sync the weights to vLLM at the next generation and
    forget the generation batch sampled from the collapsed weights, as a newly built trainer would.

    TRL syncs only when `state.global_step != _last_loaded_step`, a test of step numbers, not of weights: after the
    rollback the step number goes back to the checkpoint's, and the engine holds the weights of a later step of the
    collapsed attempt. In TRL's own flow the last sync comes after the rollback target (a checkpoint is confirmed
    only by verdicts on episodes sampled after it), so the numbers differ; anything else that syncs or sets the step
    (an evaluation callback, a future change) could make them equal, so the sync is made unconditional here. With
    `steps_per_generation > 1`, `_buffered_inputs` may hold a batch sampled from the collapsed weights, and `_step`
    decides whether it is used. Without vLLM the trainer generates with its own weights: nothing to sync.
    """
    # TRL private: GRPOTrainer._last_loaded_step (set to -1 in __init__ when use_vllm, compared with
    # state.global_step before each generation in _generate / _generate_single_turn, and by
    # arc_trl/rollout/streams.py), _buffered_inputs and _step (the generation batch reused for
    # steps_per_generation x num_iterations micro-steps, and the micro-step counter that decides when to generate;
    # a new trainer starts with None and 0, also when it resumes from a checkpoint).
    if hasattr(trainer, "_last_loaded_step"):
        trainer._last_loaded_step = -1
    trainer._buffered_inputs = None
    trainer._step = 0


def save_checkpoint_now(trainer) -> None:
    """Write `output_dir/checkpoint-{global_step}` (weights, optimizer, scheduler, RNG states, trainer state) the way
    the trainer's own saves do, rotation included; called on every process (saving is collective)."""
    # transformers private: Trainer._save_checkpoint(model, trial), what the training loop calls on a save step
    # (ArcGRPOTrainer overrides it to spare protected checkpoints from the rotation).
    trainer._save_checkpoint(trainer.model, trial=None)
