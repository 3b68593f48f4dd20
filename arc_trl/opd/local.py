"""Teachers that run in the trainer process: a separately loaded model, the frozen base of a LoRA student, or the
live policy itself (a self-teacher, with a privileged prompt).

Both return the teacher's own log-probs (temperature 1), like the vLLM server backend, whatever the student's
sampling temperature: docs/opd.md ("Temperature").
"""

from __future__ import annotations

from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

import torch

from arc_trl.integrations.trl_internals import per_token_logps


def _completion_logps(forward, sequences, prompt_lengths, batch_size, pad_id, device) -> list[list[float]]:
    """Right-pad chunks of sequences of similar length (positions start at 0, as in generation), run
    `forward(ids, mask) -> (B, W-1)` next-token log-probs, and slice each row's completion region; rows in the order
    given."""
    out: list[list[float]] = [[] for _ in sequences]
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]), reverse=True)  # less padding per chunk
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = max(len(sequences[i]) for i in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        att = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, i in enumerate(chunk):
            ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
            att[row, : len(sequences[i])] = 1
        logps = forward(ids.to(device), att.to(device)).float().cpu()  # logps[:, t] = log p(token t+1 | <= t)
        for row, i in enumerate(chunk):
            s, p = sequences[i], prompt_lengths[i]
            out[i] = logps[row, p - 1 : len(s) - 1].tolist() if len(s) > p else []
    return out


def check_teacher_path(path: str) -> None:
    """ValueError naming `path` when it is a local folder without a model (e.g. a training run that has not finished:
    its output_dir holds the model only once the run has saved it) or an absolute path that does not exist; a hub id
    is left to transformers."""
    folder = Path(path).expanduser()
    if folder.is_absolute() and not folder.exists():
        raise ValueError(f"teacher_model {path}: no such folder")
    if folder.is_dir() and not any((folder / name).is_file() for name in ("config.json", "adapter_config.json")):
        raise ValueError(f"teacher_model {path}: no model in this folder (no config.json, no adapter_config.json); a "
                         "training run's output_dir holds its model once the run has finished (run_summary.json "
                         "written), its checkpoint-N folders the model at step N")


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class LocalTeacher:
    """A frozen causal LM loaded next to the trainer (small teachers, tests). Uses TRL's fused log-prob LM head."""

    def __init__(self, model, pad_token_id: int, batch_size: int = 8, accelerator=None) -> None:
        """`accelerator`: under DeepSpeed/FSDP the teacher is wrapped like TRL's reference model (ZeRO-3 keeps it
        partitioned and gathers layers in its forward); otherwise it is moved to the accelerator's device."""
        from trl.trainer.utils import add_fused_lm_head

        from arc_trl.integrations.trl_compat import use_torch_logprob_on_cpu

        use_torch_logprob_on_cpu()  # TRL 1.15 on CPU only (arc_trl/integrations/trl_compat.py)
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        add_fused_lm_head(model)  # temperature 1; before any wrapping: it patches model.forward
        if accelerator is not None:
            from accelerate.utils import DistributedType

            if accelerator.distributed_type == DistributedType.DEEPSPEED:
                from trl.models import prepare_deepspeed

                model = prepare_deepspeed(model, accelerator)
            elif accelerator.distributed_type == DistributedType.FSDP:
                from trl.models import prepare_fsdp

                model = prepare_fsdp(model, accelerator)
            else:
                model = model.to(accelerator.device)
        self.model = model
        self.pad_token_id = pad_token_id
        self.batch_size = batch_size
        self.device = accelerator.device if accelerator is not None else next(model.parameters()).device

    @classmethod
    def from_pretrained(cls, path: str, pad_token_id: int, dtype=None, accelerator=None, **kwargs) -> "LocalTeacher":
        """`path`: a model folder or hub id; a training run's output_dir once the run has finished (full fine-tuning:
        the model; LoRA: the adapter, loaded onto its `base_model_name_or_path` by transformers' PEFT integration),
        or one of its checkpoint-N folders."""
        from transformers import AutoModelForCausalLM

        from arc_trl.integrations.rope_precision import restore_fp32_rope

        check_teacher_path(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or "auto")
        restore_fp32_rope(model)  # DeepSpeed ZeRO-3's zero.Init builds the rotary frequencies in bf16
        return cls(model, pad_token_id, accelerator=accelerator, **kwargs)

    @torch.no_grad()
    def _forward(self, ids, att):
        labels = ids.masked_fill(att == 0, -100)
        return self.model(input_ids=ids, attention_mask=att, labels=labels, fused_lm_head=True).log_probs

    def score(self, sequences, prompt_lengths):
        return _completion_logps(
            self._forward, sequences, prompt_lengths, self.batch_size, self.pad_token_id, self.device
        )

    def submit(self, sequences, prompt_lengths) -> Future:
        return _done(self.score(sequences, prompt_lengths))


class BaseModelTeacher:
    """With LoRA training: the frozen base model (adapter disabled) as teacher, at no extra memory.

    This is the prime-rl ARC fork's Phase-0 "same checkpoint" teacher. It goes through the trainer's own
    `_get_per_token_logps_and_entropies`, so DeepSpeed/FSDP wrapping and the fused LM head are handled by TRL.
    TRL's fused head divides the logits by the trainer's temperature (a closure constant); when that is not 1, a
    second fused head at temperature 1 is built on the same base model and swapped in for the teacher's forwards.
    """

    adapter_on = False  # the frozen base: the adapter disabled (PolicyTeacher: on)

    def __init__(self, trainer, batch_size: int = 8) -> None:
        from accelerate.utils import is_peft_model

        peft_model = trainer.accelerator.unwrap_model(trainer.model)
        if not is_peft_model(peft_model) and not self.adapter_on:
            raise ValueError("teacher_backend=base needs a LoRA (PEFT) student: set use_peft: true")
        self.trainer = trainer
        self.batch_size = batch_size
        # the model TRL patched with its (tempered) fused head: a PEFT model's base, else the model itself
        self._base = peft_model.get_base_model() if is_peft_model(peft_model) else peft_model
        self._untempered_forward = None
        if trainer.temperature != 1.0:
            from trl.trainer.utils import add_fused_lm_head

            tempered = self._base.forward
            add_fused_lm_head(self._base, cast_lm_head_to_fp32=trainer.args.cast_lm_head_to_fp32)
            self._untempered_forward, self._base.forward = self._base.forward, tempered

    @torch.no_grad()
    def _forward(self, ids, att):
        from trl.trainer.utils import use_adapter

        trainer = self.trainer
        model = trainer.accelerator.unwrap_model(trainer.model)
        tempered = self._base.forward
        if self._untempered_forward is not None:
            self._base.forward = self._untempered_forward
        try:
            with self._weights(model, use_adapter):
                logps = per_token_logps(trainer, trainer.model, ids, att, ids.size(1) - 1)
        finally:
            self._base.forward = tempered
        return logps

    def _weights(self, model, use_adapter):
        """The weights the teacher's forwards use (the hook `PolicyTeacher` overrides): the adapter disabled."""
        return use_adapter(model, adapter_name=None)

    def score(self, sequences, prompt_lengths):
        device = self.trainer.accelerator.device
        pad = self.trainer.processing_class.pad_token_id
        return _completion_logps(self._forward, sequences, prompt_lengths, self.batch_size, pad, device)

    def submit(self, sequences, prompt_lengths) -> Future:
        return _done(self.score(sequences, prompt_lengths))


class PolicyTeacher(BaseModelTeacher):
    """The live policy as its own teacher (`teacher_backend: policy`): the trainer's model with its adapter ON (full
    fine-tuning: the model itself), no grad, in eval mode (no dropout, LoRA's included: the teacher's distribution,
    not a sample of it), temperature 1. The current weights, not an EMA of them: docs/opd.md, "Peer teacher"."""

    adapter_on = True

    @contextmanager
    def _weights(self, model, use_adapter):
        was_training = model.training
        model.eval()
        try:
            yield
        finally:
            model.train(was_training)
