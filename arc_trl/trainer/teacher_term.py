"""The on-policy-distillation term of each generation batch: teacher scores in, advantages (or KL reference) out.

`TeacherTerm` scores the batch's episodes with `trainer.teacher` (a teacher that `overlaps_generation`, a server,
gets finished episodes while the others still generate: `submit_finished`, the rollout's `on_finished`), then adds
the teacher term to TRL's batch (`apply`): with `teacher_loss: advantage`, A_t = adv_tau * A + teacher_tau *
clip(logp_T - logp_S) (`arc_trl.opd.teacher_math`); with `reverse_kl`, the batch's reference log-probs become the
teacher's, for TRL's own KL term (`ArcGRPOTrainer.compute_loss` sets its weight). `teacher_privileged: peer` scores,
after the rewards, only the episodes whose GRPO group has another successful episode (`peer_prompts.py`). The teacher
itself is built by `arc_trl.opd.backends.build_teacher`. docs/opd.md.
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from arc_trl.opd.teacher_math import TeacherStats, opd_advantages, teacher_log_ratio, teacher_stats
from arc_trl.trainer.loss_mask import loss_mask
from arc_trl.trainer.peer_prompts import peer_prompt_ids
from arc_trl.trainer.sharded_forwards import sharded_padding
from arc_trl.integrations.trl_internals import per_token_logps

# `defer_old_logps`: the batch keys that carry the teacher term to the loss (`TeacherTerm.at_loss_time`)
TEACHER_LOGPS, BASE_ADVANTAGES = "arc_teacher_logps", "arc_base_advantages"


class TeacherTerm:
    """The teacher term of `trainer` (its `teacher`, `arc_config` and `step_clock` are read at each use)."""

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.rows: list[dict[str, Any]] | None = None  # the batch's dataset rows
        self.jobs: list[tuple[list[int], Any]] = []  # (episode indices, future of their scores)

    def start_batch(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.jobs = []

    def submit_finished(self, episodes) -> None:
        """Start scoring episodes that just finished (a teacher server works while generation goes on)."""
        with self.trainer.step_clock.phase("teacher"):
            self.jobs.append(self.submit(self.rows, episodes))

    def submit(self, rows: list[dict[str, Any]], episodes) -> tuple[list[int], Any]:
        """(the episodes' indices, the future of their teacher scores): `rows` are their batch's dataset rows. Also
        called from the background rollout's thread (`async_rollouts: 1`), so it touches no state of the step."""
        prompts_t = [self.prompt_ids(rows[ep.index], ep) for ep in episodes]
        sequences = [p + ep.completion_ids for p, ep in zip(prompts_t, episodes)]
        return [ep.index for ep in episodes], self.trainer.teacher.submit(sequences, [len(p) for p in prompts_t])

    def adopt(self, jobs: list[tuple[list[int], Any]]) -> None:
        """This batch's teacher scores were started already (by its background rollout, as its episodes finished)."""
        self.jobs = list(jobs)

    def prompt_ids(self, row, episode) -> list[int]:
        """The teacher's prompt: the student's, or the privileged variant built with the dataset (`teacher_prompt`
        column: same template, privileged block appended), so the completion tokens are identical for both."""
        if self.trainer.arc_config.teacher_privileged == "none":
            return episode.prompt_ids
        if "teacher_prompt" not in row:
            raise KeyError("teacher_privileged is set but the dataset has no 'teacher_prompt' column")
        from arc_trl.chat_template import prompt_ids

        return prompt_ids(self.trainer.processing_class, row["teacher_prompt"], **self.trainer.chat_template_kwargs)

    def scores(self, inputs, episodes, rewards=None) -> list[list[float]]:
        """The teacher's log-probs of each episode's completion tokens (`[]`: none, e.g. no peer)."""
        if self.trainer.arc_config.teacher_privileged == "peer":
            return self.peer_scores(inputs, episodes, rewards)
        if not self.jobs:  # in-process teachers: one batched call after the rollout
            prompts_t = [self.prompt_ids(row, ep) for row, ep in zip(inputs, episodes)]
            sequences = [p + ep.completion_ids for p, ep in zip(prompts_t, episodes)]
            return self.trainer.teacher.score(sequences, [len(p) for p in prompts_t])
        scores: list[list[float]] = [[] for _ in episodes]
        for indices, future in self.jobs:
            for index, row in zip(indices, future.result()):
                scores[index] = row
        self.jobs = []
        return scores

    def peer_scores(self, inputs, episodes, rewards) -> list[list[float]]:
        """`teacher_privileged: peer`: only the episodes whose group has a peer are scored, on their peer prompt
        followed by their own completion tokens; the others get `[]` (no teacher term: NaN, hence 0)."""
        prompts_t = peer_prompt_ids(self.trainer, inputs, episodes, rewards)
        chosen = [i for i, p in enumerate(prompts_t) if p is not None]
        sequences = [prompts_t[i] + episodes[i].completion_ids for i in chosen]
        lengths = [len(prompts_t[i]) for i in chosen]
        extra = sharded_padding(self.trainer.accelerator, len(chosen))  # scored, then dropped
        sequences += [episodes[0].prompt_ids + episodes[0].completion_ids] * extra
        lengths += [len(episodes[0].prompt_ids)] * extra
        scored = self.trainer.teacher.score(sequences, lengths) if sequences else []
        out: list[list[float]] = [[] for _ in episodes]
        for i, row in zip(chosen, scored):
            out[i] = row
        return out

    def student_logps(self, output) -> Float[Tensor, "batch seq"]:
        """Log-probs of the sampled tokens under the policy that generated them (detached)."""
        if output.get("old_per_token_logps") is not None:
            return output["old_per_token_logps"]
        if output.get("sampling_per_token_logps") is not None:
            return output["sampling_per_token_logps"]
        trainer = self.trainer
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        att = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad():
            return per_token_logps(trainer, trainer.model, ids, att, output["completion_ids"].size(1),
                                   batch_size=trainer.args.per_device_train_batch_size)

    def apply(self, inputs, episodes, output, deferred: bool = False, rewards=None) -> TeacherStats:
        """Add the teacher term to the batch `output` (in place); this process's statistics of it.

        `deferred` (`defer_old_logps`): the batch has no old log-probs, so the term itself waits for the training
        forward (`at_loss_time`): the batch keeps the teacher's log-probs and the GRPO advantages under keys of its
        own (TRL splits every batch tensor per micro-batch along dim 0). The statistics (`teacher_kl`, ...) are then
        taken against the sampler's (vLLM's) log-probs instead of the trainer's, tokens without a sampler value
        counting as missing. `rewards`: the batch's weighted rewards over all processes (`teacher_privileged: peer`
        chooses the peers by them)."""
        arc = self.trainer.arc_config
        with self.trainer.step_clock.phase("teacher"):  # in-process forwards, or the wait for a server's results
            scores = self.scores(inputs, episodes, rewards)
        completion_ids = output["completion_ids"]
        teacher_logps = torch.full(completion_ids.shape, float("nan"), device=completion_ids.device)
        for i, row in enumerate(scores):
            if row:
                teacher_logps[i, : len(row)] = torch.tensor(row, dtype=torch.float32, device=completion_ids.device)
        # with device_map="auto" a model's last layer (hence its log-probs) can sit on another GPU than the batch
        student_logps = self.student_logps(output).detach().to(completion_ids.device)
        mask = loss_mask(output)
        clip = arc.teacher_logprob_clip
        if deferred:
            output[TEACHER_LOGPS], output[BASE_ADVANTAGES] = teacher_logps, output["advantages"]
        elif arc.teacher_loss == "advantage":
            output["advantages"] = opd_advantages(
                output["advantages"], teacher_logps, student_logps, mask, arc.adv_tau, arc.teacher_tau, clip
            )
        else:  # reverse_kl: TRL's k3 KL term against the teacher (see compute_loss); missing values contribute 0
            output["advantages"] = arc.adv_tau * output["advantages"]
            diff, _, _ = teacher_log_ratio(teacher_logps, student_logps, mask, clip)
            output["ref_per_token_logps"] = student_logps + diff
        return teacher_stats(teacher_logps, student_logps, mask, clip)

    def at_loss_time(self, inputs: dict[str, Any], student_logps: Float[Tensor, "batch seq"]) -> None:
        """`defer_old_logps`: the teacher term of a micro-batch (stored by `apply(..., deferred=True)`) from the
        training forward's detached log-probs, exactly as `apply` computes it from the old ones; in place, before
        TRL's `_compute_loss` reads `advantages` / `ref_per_token_logps`."""
        arc = self.trainer.arc_config
        teacher_logps, advantages = inputs[TEACHER_LOGPS], inputs[BASE_ADVANTAGES]
        student_logps = student_logps.to(teacher_logps.device)
        mask = loss_mask(inputs)
        clip = arc.teacher_logprob_clip
        if arc.teacher_loss == "advantage":
            inputs["advantages"] = opd_advantages(
                advantages, teacher_logps, student_logps, mask, arc.adv_tau, arc.teacher_tau, clip
            )
        else:
            inputs["advantages"] = arc.adv_tau * advantages
            diff, _, _ = teacher_log_ratio(teacher_logps, student_logps, mask, clip)
            inputs["ref_per_token_logps"] = student_logps + diff
