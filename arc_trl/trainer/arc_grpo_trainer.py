"""`ArcGRPOTrainer`: TRL's `GRPOTrainer` with the ARC REPL rollout, ARC rewards and an on-policy-distillation term.

A thin subclass: `__init__` wires the pieces and each override is a short hook into a module of its own:

- the rollout: `arc_trl.rollout.ArcRollout`, TRL's `rollout_func` (the batch's dataset rows handed over per batch);
- the `ArcConfig` keys no TRL hook reads: the in-training evaluation (`arc_trl.eval.callback`, when
  `eval_every_steps` > 0, on the `eval_dataset` given) and the collapse guard (`arc_trl.collapse`: its callback first
  in the list, and `train()` run by its stop / rollback loop), so `trainer.train()` is the run `arc-trl train` makes;
- the loss mask: `loss_mask.py` (budget-ended episodes masked like truncated ones; the empty-mask check);
- the teacher term: `teacher_term.py`; the batch metrics: `batch_metrics.py`; the step-time budget:
  `step_timing.py` (`time/*`: `_generate`, `training_step`, the sandbox pool, `vllm_generation.sync_weights`, the
  optimizer step); rollout dumps: `rollout_dump.py`;
- micro-batches grouped by length and trimmed of all-padding columns: `micro_batches.py` (`_prepare_inputs`,
  `compute_loss`);
- `defer_old_logps` (off by default): TRL's old-log-prob forward skipped, the vLLM IS ratio and the teacher term
  computed per micro-batch from the training forward (`_compute_loss`, `_at_loss_time`);
- LoRA weight sync: the adapter merged into new tensors, the base never written (`lora_merge.py`);
- FP8 rollouts (`vllm_rollout_dtype`, `vllm_kv_cache_dtype`): the colocated engine built with them, each weight sync
  quantized again (`integrations/fp8_rollout.py`, `trl_internals.requantize_on_sync`); `vllm_kv_cache_memory_gib`: its
  KV cache fixed, vLLM's start-up memory profile skipped (`arc_trl/integrations/colocated_engine.py`);
- `async_rollouts: 1`: the next step's rollout in the background while this step trains (`async_rollout.py`:
  `get_batch_samples` reads one step ahead, `_generate` takes, pushes and launches, `train` discards what is in
  flight at each call's start and end);
- TRL's and vLLM's private members: only through `arc_trl.integrations.trl_internals`.
Everything else (sampling, weight sync, clipping, logging, checkpointing) is TRL's.
"""

from __future__ import annotations

import logging
import time

from transformers import Trainer
from trl import GRPOConfig, GRPOTrainer

from arc_trl.chat_template import end_of_turn_id
from arc_trl.collapse.loop import attach_collapse_guard, train_with_guard
from arc_trl.integrations.colocated_engine import claim_rendezvous_port, colocated_engine_extra, rendezvous_port_held
from arc_trl.config import ArcConfig
from arc_trl.eval.callback import ArcEvalCallback
from arc_trl.rollout.arc_rollout import ArcRollout
from arc_trl.rollout.generators import wait_for_the_push
from arc_trl.rollout.settings import RolloutSettings
from arc_trl.trainer.async_rollout import AsyncRollouts, async_generate, process_agreement
from arc_trl.trainer.batch_metrics import (
    episode_metrics,
    sampling_mismatch_metrics,
    teacher_metrics,
    trl_sampling_metrics,
)
from arc_trl.trainer.loss_mask import EmptyLossMaskError, check_loss_mask, loss_mask, mask_truncated_episodes
from arc_trl.trainer.micro_batches import group_by_length, grouping_keeps_loss, trim_padding
from arc_trl.trainer.rollout_dump import dump_rollouts
from arc_trl.trainer.learning_signal import NoLearningSignalCallback
from arc_trl.trainer.wandb_episodes import WandbEpisodes, default_wandb_dir
from arc_trl.run_summary import print_train_summary
from arc_trl.integrations.rope_precision import restore_fp32_rope
from arc_trl.trainer.sampling_mismatch import importance_sampling_ratio
from arc_trl.trainer.step_timing import StepBudget, StepBudgetCallback, StepClock, TimedPool, timed_method
from arc_trl.trainer.time_budget import TimeBudgetCallback
from arc_trl.opd.backends import build_teacher
from arc_trl.trainer.teacher_term import TEACHER_LOGPS, TeacherTerm
from arc_trl.integrations.trl_internals import (
    bounded_server_client,
    buffered_micro_batches,
    checkpoint_folder,
    colocated_engine_kwargs,
    entropy_bonus_enabled,
    log_metrics,
    lossless_lora_sync,
    overwrite_last_metric,
    replace_buffered_micro_batches,
    requantize_on_sync,
    seed_colocated_sampling,
    watch_per_token_logps,
    without_old_logps,
)

__all__ = ["ArcGRPOTrainer", "EmptyLossMaskError"]

logger = logging.getLogger(__name__)


class ArcGRPOTrainer(GRPOTrainer):
    def __init__(
        self,
        model,
        args: GRPOConfig,
        arc_config: ArcConfig,
        train_dataset=None,
        eval_dataset=None,
        processing_class=None,
        peft_config=None,
        callbacks=None,
        reward_funcs=None,
        sandbox_pool=None,
        teacher=None,
    ) -> None:
        from arc_trl.rewards.trl_rewards import make_reward_funcs
        from arc_trl.sandbox import SandboxPool
        from arc_trl.integrations.trl_compat import use_torch_logprob_on_cpu

        use_torch_logprob_on_cpu()  # TRL 1.15 on CPU only (arc_trl/integrations/trl_compat.py)

        self.arc_config = arc = arc_config
        arc.check_with(args)
        if arc.eval_every_steps > 0 and eval_dataset is None:
            raise ValueError("eval_every_steps > 0 needs an eval_dataset, the held-out tasks to play: pass "
                             "eval_dataset=build_dataset(...) (arc-trl train: set the eval_dataset key)")
        if arc.teacher_loss == "reverse_kl" and arc.teacher_tau > 0 and args.beta != 0.0:
            raise ValueError(
                "teacher_loss=reverse_kl uses TRL's KL term with the teacher as reference; set beta: 0.0 "
                "(the teacher's weight is teacher_tau)"
            )
        default_wandb_dir(args)  # W&B's wandb/ folder under output_dir, not the working directory (WANDB_DIR wins)
        if args.use_vllm:
            from arc_trl.integrations.vllm_cpu import make_cpu_weights_reloadable

            make_cpu_weights_reloadable()  # no-op on GPU builds

        own_rewards = reward_funcs is None
        if own_rewards:
            reward_funcs, weights = make_reward_funcs(arc.reward_mode, arc.agent_mode, arc.log_reward_components)
            if args.reward_weights is None:
                args.reward_weights = weights
            own_rewards = list(args.reward_weights) == list(weights)
        if arc.teacher_privileged == "peer" and arc.peer_min_reward is None and not own_rewards:
            raise ValueError("teacher_privileged: peer with peer_min_reward: null counts as a success the reward "
                             "mode's top score, which holds for arc-trl's own reward functions and weights only: set "
                             "peer_min_reward (the weighted reward a peer must reach) for custom reward_funcs or "
                             "reward_weights")
        self.sandbox_pool = sandbox_pool or SandboxPool(num_workers=arc.sandbox_workers, config=arc.sandbox_config())
        self.step_clock = StepClock()
        self.rollout = ArcRollout(
            TimedPool(self.sandbox_pool, self.step_clock),
            RolloutSettings(
                agent_mode=arc.agent_mode,
                max_turns=arc.max_turns,
                max_tokens_per_turn=arc.max_tokens_per_turn,
                max_completion_length=args.max_completion_length,
                scheduling=arc.rollout_scheduling,
            ),
        )
        self._teacher_kl_coef = 0.0
        self._last_rewards = None  # the weighted rewards of the last batch (for the rollout dump)
        self._last_reward_parts = None  # {reward function: its unweighted values} of the last batch (the dump)
        colocated = args.use_vllm and args.vllm_mode == "colocate"  # a server takes them on its command line
        extra = colocated_engine_extra(colocated, arc.vllm_rollout_dtype, arc.vllm_kv_cache_dtype,
                                       arc.vllm_kv_cache_memory_gib)
        if colocated:
            claim_rendezvous_port()  # not TRL's 29500, which runs started together on one machine all take
        # FP8 rollouts, a fixed KV cache: TRL's colocated vllm.LLM is built here (its store binds the claimed port, held
        # till then); a server: TRL's client of it, every request with a deadline (integrations/vllm_server_client.py)
        server = args.use_vllm and args.vllm_mode == "server"
        with (colocated_engine_kwargs(extra), bounded_server_client(arc.vllm_request_timeout_s if server else None),
              rendezvous_port_held()):
            super().__init__(
                model=model,
                reward_funcs=reward_funcs,
                args=args,
                train_dataset=train_dataset,
                eval_dataset=eval_dataset,
                processing_class=processing_class,
                callbacks=callbacks,
                peft_config=peft_config,
                rollout_func=self.rollout,
            )
        # ZeRO-3's zero.Init built the rotary frequencies in bf16 (integrations/rope_precision.py): float32 again,
        # before the first forward, for the policy and for TRL's reference model when it loaded one
        for model_name in ("model", "ref_model"):
            if getattr(self, model_name, None) is not None and restore_fp32_rope(getattr(self, model_name)):
                logger.info("%s: rotary inv_freq recomputed in float32 (DeepSpeed zero.Init had built it in bf16)",
                            model_name)
        # Fail now, not at the first rollout, when generation would not stop at the template's end of turn.
        self.end_of_turn = end_of_turn_id(self.processing_class, self.eos_token_ids,
                                          **(self.chat_template_kwargs or {}))
        if arc.benchmark_full_turns and (not self.use_vllm or arc.rollout_scheduling != "lockstep"):
            raise ValueError("benchmark_full_turns needs use_vllm: true and rollout_scheduling: lockstep (it sets "
                             f"vLLM's min_tokens and logit_bias per turn); got use_vllm={self.use_vllm}, "
                             f"rollout_scheduling={arc.rollout_scheduling}")
        self.teacher = teacher if teacher is not None else build_teacher(self)
        self.teacher_term = TeacherTerm(self)
        if self.teacher is not None and arc.teacher_loss == "reverse_kl":
            self._teacher_kl_coef = arc.teacher_tau
        if self.teacher is not None and getattr(self.teacher, "overlaps_generation", False):
            if arc.teacher_privileged == "peer":  # a teacher object passed in: ArcConfig refuses the server backend
                raise ValueError("teacher_privileged=peer needs a teacher that scores after the rollout: this one "
                                 "overlaps generation (scores episodes as they finish, before their group is "
                                 "rewarded)")
            self.rollout.on_finished = self.teacher_term.submit_finished  # score finished episodes during generation
        if self.use_vllm:
            # a server and several processes: none sends its requests before the main process's push has ended
            wait_for_the_push(self.vllm_generation, self.accelerator)
            why_not = lossless_lora_sync(self.vllm_generation)  # LoRA: merged out of place, the base never rounded
            if why_not and why_not != "not a PEFT model":
                logger.warning("LoRA weight sync: TRL's merge/unmerge in place (it rounds the base weights at every "
                               "sync): %s", why_not)
            if arc.vllm_rollout_dtype == "fp8":  # each sync quantizes the pushed weights again (colocated)
                requantize_on_sync(self.vllm_generation)
            # TRL calls it from _generate, _generate_single_turn and VLLMGeneration.generate (sleep mode)
            timed_method(self.vllm_generation, "sync_weights", self.step_clock, "weight_sync")
        why_not = grouping_keeps_loss(args, entropy_bonus_enabled(self))
        self.groups_by_length = arc.length_grouped_micro_batches and why_not is None
        if arc.length_grouped_micro_batches and why_not:
            logger.info("length_grouped_micro_batches: off, %s (only all-padding columns are trimmed)", why_not)
        self.step_budget = StepBudget(self.step_clock, self.model, self.accelerator, arc.peak_tflops)
        self.add_callback(StepBudgetCallback(self.step_budget, lambda metrics: log_metrics(self, "train", metrics)))
        if arc.eval_every_steps > 0:  # the held-out tasks played every eval_every_steps (eval/callback.py)
            self.add_callback(ArcEvalCallback.from_config(self, eval_dataset))
        self.base_learning_rate = args.learning_rate  # the collapse guard's rollbacks scale args.learning_rate from it
        self.collapse_rollbacks = 0  # rollbacks of the last train() call
        self.collapse_guard = attach_collapse_guard(self)  # first in the callbacks; None when collapse_guard is off
        self.no_signal = NoLearningSignalCallback(arc.no_signal_warn_steps) if arc.no_signal_warn_steps > 0 else None
        if self.no_signal is not None:  # warns when every group's rewards have been equal for that many steps
            self.add_callback(self.no_signal)
        self.time_budget = TimeBudgetCallback(arc.max_train_seconds) if arc.max_train_seconds else None
        if self.time_budget is not None:  # max_train_seconds: its clock starts in train(), rollbacks included
            self.add_callback(self.time_budget)
        self.run_summary: dict | None = None  # what the last train() did (run_summary.py), on the main process
        self.wandb_episodes = WandbEpisodes(arc.wandb_episodes_every_steps, arc.wandb_episodes, args.num_generations)
        # a drop at the end of a train() call is logged as an entry of its own (Trainer.log, not GRPOTrainer's, which
        # would average and clear the metrics of a step that is not running)
        self.async_rollouts = (AsyncRollouts(arc.async_rollouts, process_agreement(self.accelerator),
                                             log_drops=lambda logs: Trainer.log(self, logs))
                               if arc.async_rollouts else None)
        seed_colocated_sampling(self, args.seed)  # last: building TRL's colocated engine seeded the RNGs with its own

    # ------------------------------------------------------------------------------------------------ TRL hooks
    def train(self, resume_from_checkpoint=None, trial=None, **kwargs):
        # Trainer.train, run by the collapse guard's loop (collapse/loop.py): after a collapse it stops the run
        # (CollapseStopped) or loads the last ok checkpoint into this trainer and calls Trainer.train again
        # (async_rollouts: each call starts and ends with no rollout in flight, async_rollout.py)
        train_once = super().train

        def once(resume):
            if self.async_rollouts is None:
                return train_once(resume_from_checkpoint=resume, trial=trial, **kwargs)
            with self.async_rollouts.attempt(self):
                return train_once(resume_from_checkpoint=resume, trial=trial, **kwargs)

        started = time.time()
        if self.time_budget is not None:
            self.time_budget.start()
        result = train_with_guard(self, resume_from_checkpoint, once)
        if self.accelerator.is_main_process:  # what the run did, in a few lines (arc_trl/run_summary.py)
            self.run_summary = print_train_summary(self, started)
        return result

    def get_batch_samples(self, epoch_iterator, num_batches, device):
        # Trainer.get_batch_samples (the batches of one optimizer step, fetched before it trains); async_rollouts:
        # one step read ahead, so that the next step's rows can be played while this step trains (the smallest hook
        # that sees them: the rows trained stay exactly the dataloader's, in its order)
        if self.async_rollouts is None:
            return super().get_batch_samples(epoch_iterator, num_batches, device)
        fetch = super().get_batch_samples
        return self.async_rollouts.lookahead.batches(epoch_iterator,
                                                     lambda: fetch(epoch_iterator, num_batches, device))

    def _generate(self, prompts):
        # GRPOTrainer._generate (weight sync + rollout_func + token counting), timed: the `generate` bucket;
        # async_rollouts: around it, the background rollout taken and the next one launched (async_rollout.py)
        with self.step_clock.phase("generate"):
            if self.async_rollouts is None or not self.model.training:
                return super()._generate(prompts)
            return async_generate(self, prompts, super()._generate)

    def training_step(self, model, inputs, num_items_in_batch):
        # Trainer.training_step (generation + scoring once per generation batch; forward + backward), timed: `train`
        with self.step_clock.phase("train"):
            return super().training_step(model, inputs, num_items_in_batch)

    def _prepare_inputs(self, generation_batch):
        # GRPOTrainer._prepare_inputs (a generation batch every steps_per_generation micro-steps, shuffled and split
        # into micro-batches, buffered): a fresh split is regrouped by length (micro_batches.py)
        before = buffered_micro_batches(self)
        inputs = super()._prepare_inputs(generation_batch)
        split = buffered_micro_batches(self)
        if not self.groups_by_length or not self.model.training or split is before or split is None:
            return inputs
        index = next(i for i, batch in enumerate(split) if batch is inputs)
        regrouped = group_by_length(split)
        replace_buffered_micro_batches(self, regrouped)
        return regrouped[index]

    def _generate_and_score_completions(self, inputs):
        # GRPOTrainer's hook between generation and the loss: the rollout gets the dataset rows, then the batch gets
        # the budget-ended episodes masked, the metrics, the loss-mask check, the teacher term and the rollout dump.
        self.teacher_term.start_batch(inputs)
        deferred = self.defers_old_logps()
        with self.rollout.rows_for(inputs):
            if deferred:  # no old-log-prob forward, no IS ratio yet: both come from the training forward
                with without_old_logps(self):
                    output = super()._generate_and_score_completions(inputs)
            else:
                output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        episodes = self.rollout.last_episodes
        if self.mask_truncated_completions:
            mask_truncated_episodes(output, episodes, self.accelerator)
        metrics = episode_metrics(self.accelerator, episodes)
        log_metrics(self, mode, metrics)
        if metrics:  # TRL's clipped_ratio (last token not EOS) misses budget endings
            overwrite_last_metric(self, mode, "completions/clipped_ratio", metrics["episode/truncated_rate"])
        if self.use_vllm and self.vllm_importance_sampling_correction and not deferred:  # deferred: at loss time
            log_metrics(self, mode, sampling_mismatch_metrics(
                self.accelerator, output, self.vllm_importance_sampling_mode,
                self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max,
            ))
        if mode == "train" and self.step_clock.is_open:
            self.step_budget.tokens.add_batch(output, episodes, self.beta)
        if self.arc_config.check_loss_mask:
            check_loss_mask(output, episodes)
        if self.teacher is not None:
            stats = self.teacher_term.apply(inputs, episodes, output, deferred=deferred, rewards=self._last_rewards)
            log_metrics(self, mode, teacher_metrics(self.accelerator, stats))
        if self.arc_config.dump_rollouts and mode == "train" and self.accelerator.is_main_process:
            dump_rollouts(self.args.output_dir, self.state.global_step, episodes, self._last_rewards,
                          output["advantages"], self.processing_class.decode, self.arc_config.dump_rollouts,
                          reward_parts=self._last_reward_parts, tokens=self.arc_config.dump_rollout_tokens)
        if mode == "train":  # every wandb_episodes_every_steps: a few episodes as a W&B table (wandb_episodes.py)
            self.wandb_episodes(self, episodes, self._last_rewards, output["advantages"], self._last_reward_parts)
        return output

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # GRPOTrainer._calculate_rewards: also log the weighted reward's min/max, and keep it for the rollout dump
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        mode = "train" if self.model.training else "eval"
        weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
        rewards = (rewards_per_func * weights).nansum(dim=1)
        log_metrics(self, mode, {"reward_min": rewards.min().item(), "reward_max": rewards.max().item()})
        self._last_rewards = rewards
        self._last_reward_parts = {name: rewards_per_func[:, j].tolist() for j, name in
                                   enumerate(self.reward_func_names)}  # unweighted, per reward function
        return rewards_per_func

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # GRPOTrainer.compute_loss: trim the micro-batch's padding, count the step's trained tokens; for teacher_loss
        # reverse_kl, TRL's KL term (beta) weighs the teacher (the batch's ref_per_token_logps, teacher_term.py) by
        # teacher_tau for this loss only
        inputs = trim_padding(inputs)  # columns that are padding in every row (micro_batches.py)
        if self.model.training and self.step_clock.is_open:  # the tokens this forward + backward attends to
            self.step_budget.tokens.add_trained(inputs)
        if not self._teacher_kl_coef:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        saved_beta, self.beta = self.beta, self._teacher_kl_coef
        try:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        finally:
            self.beta = saved_beta

    def defers_old_logps(self) -> bool:
        """`defer_old_logps` in effect: the option is on and TRL would recompute old log-probs for vLLM's IS
        correction (read at each batch: tests switch `use_vllm` on after construction)."""
        return bool(self.arc_config.defer_old_logps and self.use_vllm and self.vllm_importance_sampling_correction)

    def _compute_loss(self, model, inputs):
        # GRPOTrainer._compute_loss; for a batch scored with defer_old_logps (no old_per_token_logps), the IS ratio,
        # TRL's sampling/* metrics and the teacher term are computed from the training forward's detached log-probs
        # the moment it returns, before TRL reads them from `inputs`: what TRL computes at scoring time from its
        # no-grad forward over the same (unchanged) weights.
        if not self.defers_old_logps() or "old_per_token_logps" in inputs:
            return super()._compute_loss(model, inputs)
        with watch_per_token_logps(self, lambda logps: self._at_loss_time(inputs, logps)):
            return super()._compute_loss(model, inputs)

    def _at_loss_time(self, inputs, logps) -> None:
        """`defer_old_logps`: a micro-batch's IS ratio, `sampling/*` metrics and teacher term from `logps`, the
        training forward's detached log-probs (in place)."""
        mode = "train" if self.model.training else "eval"
        vllm_mode = self.vllm_importance_sampling_mode
        clip_min, clip_max = self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max
        sampler, mask = inputs["sampling_per_token_logps"], loss_mask(inputs)
        logps = logps.to(sampler.device)  # device_map="auto": the last layer may sit on another GPU than the batch
        ratio = importance_sampling_ratio(logps, sampler, mask, vllm_mode, clip_min, clip_max)
        inputs["importance_sampling_ratio"] = ratio
        log_metrics(self, mode, trl_sampling_metrics(self.accelerator, logps, sampler, mask, ratio,
                                                     sequence_level=vllm_mode.startswith("sequence")))
        log_metrics(self, mode, sampling_mismatch_metrics(self.accelerator, inputs | {"old_per_token_logps": logps},
                                                          vllm_mode, clip_min, clip_max))
        if TEACHER_LOGPS in inputs:
            self.teacher_term.at_loss_time(inputs, logps)

    def _save_checkpoint(self, model, trial) -> None:
        # Trainer._save_checkpoint, with the rotation (`save_total_limit`) sparing the checkpoints that a callback's
        # `protected_checkpoints()` names (the collapse guard's last ok checkpoint)
        protected = set().union(*(getattr(cb, "protected_checkpoints", lambda: set())()
                                  for cb in self.callback_handler.callbacks))
        limit = self.args.save_total_limit
        if not protected or not limit or limit <= 0:
            return super()._save_checkpoint(model, trial)
        self.args.save_total_limit = None  # rotate below instead, with the protected set
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        if self.args.should_save:
            from arc_trl.collapse.checkpoints import rotate_keeping

            keep = protected | ({self.state.best_model_checkpoint} if self.state.best_model_checkpoint else set())
            rotate_keeping(checkpoint_folder(self, trial), limit, keep)

    def close(self) -> None:
        """Stop the background rollout, the sandbox processes (also done at interpreter exit) and the GPU memory
        sampler."""
        if self.async_rollouts is not None:
            self.async_rollouts.close()
        self.sandbox_pool.close()
        self.step_budget.close()
