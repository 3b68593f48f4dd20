"""Token-in, token-out generation backends used by the episode loop.

A generator takes a batch of token-id sequences and a per-call token cap and returns, for each sequence, the new
token ids and (when the backend has them) the sampler's log-probabilities. Inside training everything goes through
TRL's own plumbing (`GRPOTrainer._generate_single_turn`: colocated vLLM, `trl vllm-serve`, or transformers
`generate`, with weight sync, DeepSpeed gathering and EOS handling); standalone evaluation uses vLLM or
transformers directly.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Protocol

import torch

from arc_trl.rollout.streams import EngineStream, RequestStream, run_turn, sampled_logprobs, trainer_stream
from arc_trl.integrations.trl_internals import generate_single_turn, sync_weights_once_per_step


class Generator(Protocol):
    eos_token_ids: list[int]

    def generate(self, sequences: list[list[int]], max_tokens: int,
                 keys: list[int] | None = None) -> tuple[list[list[int]], list[list[float]] | None]:
        """New tokens (and sampler logprobs, or None) for each sequence, at most `max_tokens` each. `keys`: the stable
        ids of the episodes the sequences continue (a server with several engines keeps an episode on one)."""

    def global_any(self, flag: bool) -> bool:
        """True if `flag` is True on any process (generation calls are collective in distributed training)."""


_MISSING = object()


def full_turn_kwargs(max_tokens: int, full_turn_end: int) -> dict:
    """vLLM sampling kwargs of a turn forced to exactly `max_tokens` tokens ending on `full_turn_end`
    (`benchmark_full_turns`): no stop before `max_tokens - 1` (`min_tokens`), then a +100 logit bias on it."""
    return {"min_tokens": max_tokens - 1, "logit_bias": {int(full_turn_end): 100.0}}


@contextmanager
def generation_overrides(trainer, max_tokens: int | None = None, temperature: float | None = None,
                         full_turn_end: int | None = None):
    """Temporarily change the trainer's sampling cap/temperature on whichever backend TRL uses (vLLM or
    transformers), restoring it afterwards. TRL keeps these settings on `vllm_generation` or on
    `generation_config` + `generation_kwargs` (the latter overrides the model's generation config).

    `full_turn_end` (vLLM, with `max_tokens`; `benchmark_full_turns`): the turn generates exactly `max_tokens`
    tokens, the last one this id: no stop before `max_tokens - 1` (`min_tokens`), then a +100 logit bias on it."""
    if trainer.use_vllm:
        targets = [(trainer.vllm_generation, {"max_completion_length": max_tokens, "temperature": temperature})]
        if full_turn_end is not None and max_tokens is not None:
            targets.append((trainer.vllm_generation.generation_kwargs, full_turn_kwargs(max_tokens, full_turn_end)))
    else:
        names = {"max_new_tokens": max_tokens, "temperature": temperature}
        targets = [(trainer.generation_config, names), (trainer.generation_kwargs, names)]
    saved = []
    for obj, values in targets:
        for key, value in values.items():
            if value is None:
                continue
            if isinstance(obj, dict):
                saved.append((obj, key, obj.get(key, _MISSING)))
                obj[key] = value
            else:
                saved.append((obj, key, getattr(obj, key)))
                setattr(obj, key, value)
    try:
        yield
    finally:
        for obj, key, value in reversed(saved):
            if isinstance(obj, dict) and value is _MISSING:
                obj.pop(key, None)
            elif isinstance(obj, dict):
                obj[key] = value
            else:
                setattr(obj, key, value)


class TrainerGenerator:
    """Generation through the trainer's configured backend (TRL `_generate_single_turn`, the smallest hook).

    Missing sampler log-probs (TRL turns vLLM's NaN into None) stay NaN, as TRL's own single-turn path keeps them:
    its importance-sampling correction and off-policy mask neutralise NaN positions, whereas 0.0 would claim the
    sampler gave the token probability 1.

    With a vLLM server (`vllm_mode: server`) each process sends its own requests, one per episode, through its own
    clients (`streams.run_turn` over a `ServerStream`), after TRL's weight sync: no gather, no padding, and each
    episode pinned to one data-parallel engine by its key (TRL's server branch gathers every process's prompts into
    one call that vLLM's balancer spreads over the engines regardless of prefixes: an episode's next turn met the
    other engine about half the time and re-prefilled its whole context there).

    TRL's server branch (kept for a structured-output regex) and colocated tensor parallelism are collective: the
    requests are gathered into one call with one `max_tokens`, and each process takes back the slice at
    `process_index * len(its requests)`. That is only right when every process sends the same number of requests
    with the same cap, while a multi-turn batch has a different number of active episodes on each process. So there
    every call first gathers (count, cap) of all processes, pads this process's requests with copies of one of them
    up to the largest count, generates with the largest cap, drops the padding's outputs and cuts each completion
    to this process's own cap (`aligned_generate`).
    """

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.eos_token_ids = list(trainer.eos_token_ids)
        arc = getattr(trainer, "arc_config", None)
        self.full_turn_end = trainer.end_of_turn if arc is not None and arc.benchmark_full_turns else None

    def generate(self, sequences, max_tokens, keys=None):
        if self.trainer.use_vllm and self.trainer.vllm_generation.mode == "server" and self._server_streams():
            keys = list(range(len(sequences))) if keys is None else keys
            if not keys:  # a process with no episode left sends nothing, but takes part in the step's first sync
                sync_weights_once_per_step(self.trainer)  # (collective: ZeRO-3 gathers, every process walks)
                return [], []
            with generation_overrides(self.trainer, max_tokens=max_tokens, full_turn_end=self.full_turn_end):
                return run_turn(self.open_stream(), sequences[: len(keys)], max_tokens, keys)
        if needs_aligned_requests(self.trainer):
            return aligned_generate(self._generate, sequences, max_tokens, self.trainer.accelerator,
                                    dummy=[self.eos_token_ids[0]])
        return self._generate(sequences, max_tokens)

    def _server_streams(self) -> bool:
        return self.stream_unsupported() is None  # else (a structured-output regex) TRL's gathered call

    def stream_unsupported(self) -> str | None:
        """Why this trainer's backend cannot run per-episode (None when it can)."""
        if not self.trainer.use_vllm:
            return ("the trainer generates with transformers `generate`, which has no continuous batching "
                    "(set use_vllm: true for per-episode scheduling)")
        vg = self.trainer.vllm_generation
        if vg.mode == "colocate" and vg.tensor_parallel_size > 1:
            return (f"colocated vLLM with vllm_tensor_parallel_size={vg.tensor_parallel_size} runs one engine across "
                    "the ranks of a tensor-parallel group, which must submit identical requests at every step")
        if getattr(vg, "structured_outputs_regex", None) is not None:
            return "vllm_structured_outputs_regex is not supported by per-episode scheduling"
        return None

    def open_stream(self) -> RequestStream:
        return trainer_stream(self.trainer)

    def _generate(self, sequences, max_tokens):
        with generation_overrides(self.trainer, max_tokens=max_tokens, full_turn_end=self.full_turn_end):
            completion_ids, logprobs = generate_single_turn(self.trainer, sequences)
        completion_ids = [list(ids) for ids in completion_ids]
        if logprobs is not None:
            logprobs = [[math.nan if lp is None else float(lp) for lp in seq] for seq in logprobs]
        return completion_ids, logprobs

    def global_any(self, flag: bool) -> bool:
        accelerator = self.trainer.accelerator
        if accelerator.num_processes == 1:
            return flag
        local = torch.tensor([1.0 if flag else 0.0], device=accelerator.device)
        return bool(accelerator.gather(local).sum().item() > 0)


def needs_aligned_requests(trainer) -> bool:
    """True when TRL's generation slices gathered results by a per-process count (TRL's server branch, taken only
    when the per-request path can't serve, or colocated vLLM with tensor parallelism): see `TrainerGenerator`."""
    if trainer.accelerator.num_processes == 1 or not trainer.use_vllm:
        return False
    vllm_generation = trainer.vllm_generation
    return vllm_generation.mode == "server" or getattr(vllm_generation, "tensor_parallel_size", 1) > 1


def wait_for_the_push(vllm_generation, accelerator) -> None:
    """Make `vllm_generation.sync_weights` return on no process before the main process's push has ended (a barrier
    after it, on the instance), in server mode with several processes; else nothing changes.

    TRL's server-mode push is the main process's alone: the others walk the weights, no collective under DDP, and
    leave at once. TRL's own server generation gathers every process's prompts to the main process after its push,
    but here each process sends its own requests (`TrainerGenerator`, the detached background rollout): with
    per-episode scheduling, which makes no collective call, a process's first requests reached the server before or
    during the push (sampled from the last step's weights, or a mix of both). Every process calls `sync_weights` at
    the same points already (ZeRO-3's gathers need it), so the barrier asks no new alignment."""
    if vllm_generation.mode != "server" or accelerator.num_processes == 1:
        return
    push = vllm_generation.sync_weights

    def push_then_wait(*args, **kwargs):
        push(*args, **kwargs)
        accelerator.wait_for_everyone()

    vllm_generation.sync_weights = push_then_wait


def aligned_generate(generate, sequences, max_tokens, accelerator, dummy: list[int]):
    """`generate(sequences, max_tokens)` made safe for a collective backend that needs equal requests everywhere.

    All processes call this together. Each pads its requests to the largest count with copies of its first request
    (`dummy` when it has none), generation runs with the largest cap, and each process keeps the outputs of its own
    requests, cut to its own cap. Sampling K tokens and keeping the first k is distributed like sampling k tokens.
    """
    from accelerate.utils import gather_object

    shapes = gather_object([(len(sequences), int(max_tokens))])
    width = max(count for count, _ in shapes)
    if width == 0:
        return [], []
    cap = max(c for count, c in shapes if count > 0)
    filler = list(sequences[0]) if sequences else list(dummy)
    padded = [list(s) for s in sequences] + [filler] * (width - len(sequences))
    ids, lps = generate(padded, cap)
    if len(ids) != width:
        raise RuntimeError(f"the generation backend returned {len(ids)} completions for {width} requests")
    ids = [row[:max_tokens] for row in ids[: len(sequences)]]
    if lps is not None:
        lps = [row[: len(kept)] for row, kept in zip(lps[: len(sequences)], ids)]
    return ids, lps


class VLLMGenerator:
    """Standalone vLLM engine (evaluation). `llm` is a `vllm.LLM`; sampling options as in `SamplingParams`."""

    def __init__(self, llm, eos_token_ids: list[int], **sampling) -> None:
        self.llm = llm
        self.eos_token_ids = list(eos_token_ids)
        self.sampling = sampling

    def generate(self, sequences, max_tokens, keys=None):
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=max_tokens, logprobs=0, **self.sampling)
        outputs = self.llm.generate([{"prompt_token_ids": s} for s in sequences], params, use_tqdm=False)
        ids, lps = [], []
        for out in outputs:
            sample = out.outputs[0]
            ids.append(list(sample.token_ids))
            lps.append(sampled_logprobs(sample))
        return ids, lps

    def global_any(self, flag: bool) -> bool:
        return flag

    def stream_unsupported(self) -> str | None:
        return None

    def open_stream(self) -> RequestStream:
        return EngineStream(self.llm, {"logprobs": 0, **self.sampling},
                            request_seed=getattr(self, "request_seed", None))


class TransformersGenerator:
    """Plain `model.generate` with left padding (evaluation without vLLM). Returns processed-score logprobs.

    When sampling, `top_k` and `min_p` default to off, as in vLLM and TRL: transformers' `generate` otherwise fills in
    `top_k=50` or the model's generation_config values (Qwen3: top_k 20), so the episodes would come from, and their
    logprobs describe, a truncated distribution that the trainer's full-softmax log-probs do not."""

    def __init__(self, model, tokenizer, eos_token_ids: list[int], batch_size: int = 8, **sampling) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.eos_token_ids = list(eos_token_ids)
        self.batch_size = batch_size
        self.sampling = {"do_sample": True, **sampling}
        if self.sampling["do_sample"]:
            self.sampling.setdefault("top_k", 0)
            self.sampling.setdefault("min_p", None)

    def stream_unsupported(self) -> str | None:
        return "transformers `generate` has no continuous batching"

    @torch.no_grad()
    def generate(self, sequences, max_tokens, keys=None):
        ids_out, lps_out = [], []
        pad_id = self.tokenizer.pad_token_id
        device = next(self.model.parameters()).device
        for start in range(0, len(sequences), self.batch_size):
            chunk = sequences[start : start + self.batch_size]
            width = max(len(s) for s in chunk)
            input_ids = torch.tensor([[pad_id] * (width - len(s)) + s for s in chunk], device=device)
            attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in chunk], device=device)
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=max_tokens,
                eos_token_id=self.eos_token_ids,
                pad_token_id=pad_id,
                output_scores=True,
                return_dict_in_generate=True,
                **self.sampling,
            )
            new = out.sequences[:, width:]
            scores = torch.stack(out.scores, dim=1).float().log_softmax(-1)  # processed scores, like vLLM's
            token_lps = scores.gather(-1, new.unsqueeze(-1)).squeeze(-1)
            for row, lp_row in zip(new.tolist(), token_lps.tolist()):
                cut = len(row)
                for i, tok in enumerate(row):
                    if tok in self.eos_token_ids:
                        cut = i + 1
                        break
                ids_out.append(row[:cut])
                lps_out.append(lp_row[:cut])
        return ids_out, lps_out

    def global_any(self, flag: bool) -> bool:
        return flag
