"""`ArcConfig`: the ARC settings `ArcGRPOTrainer` reads: agent, rewards, REPL episode, sandbox, teacher, in-training
evaluation, collapse guard, debugging.

The trainer honours every key itself (`ArcGRPOTrainer(..., arc_config=...)` attaches the evaluation callback and the
collapse guard, and its `train()` stops or rolls back), so a Python caller and `arc-trl train` get the same run. The
keys only a script reads (which tasks, tokenizer and model loading, the GPU layout) are `ArcScriptArguments`
(arc_trl/config/script_args.py). Both sit next to TRL's `GRPOConfig` and `ModelConfig` in one flat YAML file parsed by
`trl.TrlParser`, so every key below is a top-level YAML key and a `--flag` on the command line (CLI overrides YAML).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arc_trl.sandbox.config import SandboxConfig

from arc_trl.config import defaults
from arc_trl.integrations.colocated_engine import kv_cache_memory_kwargs
from arc_trl.config.type_checks import field_type_problems
from arc_trl.integrations.fp8_rollout import check_choices, warn_sequence_is
from arc_trl.config.ineffective_keys import warn_ineffective_keys
from arc_trl.opd.backends import TEACHER_BACKENDS  # the registry of teacher backends: their names, needs and help
from arc_trl.rewards.modes import REWARD_MODES  # the registry of reward modes: its names
from arc_trl.config.choices import AGENT_MODES, ROLLOUT_SCHEDULINGS

TEACHER_LOSSES = ("advantage", "reverse_kl")
PRIVILEGED_INFO = ("none", "solutions", "program", "peer")
COLLAPSE_ACTIONS = ("off", "warn", "stop", "rollback")


@dataclass
class ArcConfig:
    # --- the agent (also how the dataset's prompts are written: arc_trl.data.build_dataset) -----------------------
    agent_mode: str = field(
        default=defaults.AGENT_MODE,
        metadata={"help": "; ".join(f"{name}: {what}" for name, what in AGENT_MODES.items()) + "."},
    )

    # --- rewards --------------------------------------------------------------------------------------------------
    reward_mode: str = field(default="barc", metadata={"help": " | ".join(REWARD_MODES) + " (see docs)."})
    log_reward_components: bool = field(
        default=True, metadata={"help": "Also log exact-match and pixel-score components (weight 0)."}
    )

    # --- REPL episode ---------------------------------------------------------------------------------------------
    max_turns: int = field(
        default=defaults.MAX_TURNS, metadata={"help": "Assistant turns per episode (program mode: always 1)."}
    )
    max_tokens_per_turn: int | None = field(
        default=defaults.MAX_TOKENS_PER_TURN,
        metadata={"help": "Token cap per assistant turn (default: max_completion_length)."},
    )
    check_transform: bool = field(
        default=False,
        metadata={"help": "REPL: after a message whose code defines `transform(grid)` (and makes no SUBMIT), run it on "
                  "every training input, tell the model which outputs match, and submit its test outputs when all do "
                  "(a pretrained coder's habit, one ```python function, then needs no SUBMIT). The prompt should say "
                  "so: configs/prompts/coder-repl.yaml does (docs/sandbox.md)."},
    )
    # The token budget of a whole episode (model + environment tokens) is GRPOConfig.max_completion_length.
    rollout_scheduling: str = field(
        default=defaults.ROLLOUT_SCHEDULING,
        metadata={"help": "lockstep: each turn, all active episodes generate together, then all run their code; "
                  "per_episode: each episode advances on its own against vLLM's continuous batching (falls back to "
                  "lockstep, with a warning, for transformers generate or colocated tensor parallel > 1). lockstep "
                  "is the default: per_episode was 1.3-1.7x faster on CPU vLLM but 0.95x on an H100 with the "
                  "realistic 0.6B policy (docs/benchmarks.md)."},
    )

    async_rollouts: int = field(
        default=0,
        metadata={"help": "0: synchronous (each step generates, then trains). 1: one step off-policy, vllm_mode: "
                  "server only: the rollout of step t+1 plays in the background while step t trains, the weights "
                  "are pushed once per step between rollouts, and vLLM's importance-sampling correction covers the "
                  "one-step lag (docs/async.md). Needs num_iterations: 1, steps_per_generation = "
                  "gradient_accumulation_steps and vllm_importance_sampling_correction: true."},
    )

    vllm_request_timeout_s: float = field(
        default=defaults.VLLM_REQUEST_TIMEOUT_S,
        metadata={"help": "vllm_mode: server: seconds each request to the vLLM server may wait for its answer "
                  "(generation, the weight push and its NCCL broadcast, /health): a server that stops answering "
                  "fails the run with an error naming the server, the request and its log, instead of hanging it. "
                  "Requests the server was given are never resent (arc_trl/integrations/vllm_server_client.py). "
                  "A teacher server: teacher_timeout_s."},
    )

    vllm_rollout_dtype: str = field(
        default="bf16",
        metadata={"help": "bf16 | fp8: the precision of the weights the vLLM engine samples rollouts with (colocated "
                  "or the student server of arc-trl serve); the trainer stays bf16. fp8: vLLM's online per-tensor FP8 "
                  "quantization, redone at every weight sync. The sampler/trainer gap grows: with TRL's default "
                  "sequence-level IS ratio a warning suggests vllm_importance_sampling_mode: token_truncate "
                  "(docs/fp8.md). Needs use_vllm (without: no effect, a warning)."},
    )
    vllm_kv_cache_dtype: str = field(
        default="auto",
        metadata={"help": "auto | fp8: the vLLM engine's KV cache (fp8: e4m3, scale 1.0, half the bytes). Needs "
                  "use_vllm (without: no effect, a warning; docs/fp8.md)."},
    )

    vllm_kv_cache_memory_gib: float | None = field(
        default=None,
        metadata={"help": "The colocated vLLM engine's KV cache in GiB (vLLM's kv_cache_memory_bytes), in place of the "
                  "share vllm_gpu_memory_utilization leaves after vLLM's start-up memory profile. That profile fails "
                  "when another process on the GPU frees memory meanwhile, e.g. a second colocated run whose engine "
                  "sleeps between steps: set this for runs that share a GPU (docs/fp8.md). vLLM still refuses to start "
                  "with less free memory than vllm_gpu_memory_utilization's share. Colocated only (a server: its "
                  "vllm_server_args)."},
    )

    # --- sandbox --------------------------------------------------------------------------------------------------
    sandbox_workers: int = field(
        default=defaults.SANDBOX_WORKERS, metadata={"help": "Code executions run in parallel."}
    )
    sandbox_timeout_s: float = field(
        default=defaults.SANDBOX_TIMEOUT_S,
        metadata={"help": "CPU-time limit (seconds) per code execution: the same verdict however busy the machine is "
                  "(docs/sandbox.md, 'Time limits')."}
    )
    sandbox_wall_timeout_s: float | None = field(
        default=None, metadata={"help": "Wall-clock backstop per code execution, for code that sleeps or waits "
                                "(None: max(4 x sandbox_timeout_s, sandbox_timeout_s + 5))."}
    )
    sandbox_memory_mb: int = field(
        default=defaults.SANDBOX_MEMORY_MB, metadata={"help": "Address-space limit of a sandbox process."}
    )
    sandbox_max_output_chars: int = field(
        default=defaults.SANDBOX_MAX_OUTPUT_CHARS, metadata={"help": "stdout/stderr kept per execution."}
    )
    sandbox_disk_mb: int = field(
        default=defaults.SANDBOX_DISK_MB, metadata={"help": "Bytes (MB) a session's working directory may hold."}
    )
    sandbox_max_files: int = field(
        default=defaults.SANDBOX_MAX_FILES, metadata={"help": "Files a session's working directory may hold."}
    )
    sandbox_idle_memory_mb: int | None = field(
        default=defaults.SANDBOX_IDLE_MEMORY_MB,
        metadata={"help": "Resident MB a session may keep between runs (more: restarted, state lost)."}
    )

    # --- teacher / on-policy distillation (docs/opd.md) ----------------------------------------------------------
    teacher_backend: str = field(
        default="none",
        metadata={"help": " | ".join(f"{name} ({backend.help})" if backend.help else name
                                     for name, backend in TEACHER_BACKENDS.items()) + "."},
    )
    teacher_model: str | None = field(default=None, metadata={"help": "Teacher model path (local/server backends)."})
    teacher_server_url: str | None = field(default=None, metadata={"help": "e.g. http://localhost:8001"})
    teacher_tau: float = field(default=0.0, metadata={"help": "Weight of the teacher term (0 = vanilla GRPO)."})
    adv_tau: float = field(default=1.0, metadata={"help": "Weight of the GRPO advantage (0 = pure distillation)."})
    teacher_loss: str = field(
        default="advantage",
        metadata={"help": "advantage: A_t = adv_tau*A + teacher_tau*(logp_T - logp_S) through the clipped surrogate; "
                  "reverse_kl: TRL's k3 KL term (beta) against the teacher, weighted by teacher_tau. Under TRL's "
                  "default use_bias_correction_kl=true the two give the same gradient on-policy and differ only "
                  "off-policy (num_iterations > 1 or steps_per_generation > gradient_accumulation_steps): "
                  "docs/opd.md."},
    )
    teacher_privileged: str = field(
        default="none",
        metadata={"help": "Privileged info in the teacher's prompt: none | solutions | program | peer (the code of "
                  "another episode of the same GRPO group that reached peer_min_reward, and that it did; groups "
                  "without one get no teacher term: docs/opd.md, 'Peer teacher')."},
    )
    peer_min_reward: float | None = field(
        default=None,
        metadata={"help": "teacher_privileged: peer: an episode is a peer when its reward (the weighted sum GRPO "
                  "normalises) is at least this. Default (null): the reward mode's top score, reached only when "
                  "every evaluated grid is exact (binary/partial/balanced 1, barc 10; docs/rewards.md): the REPL "
                  "agent's submitted test outputs, the program agent's train and test outputs, so a peer is an "
                  "episode that solved the task, never one that came close."},
    )
    peer_max_chars: int = field(
        default=4000, metadata={"help": "teacher_privileged: peer: characters of the peer's code kept (its first)."}
    )
    teacher_logprob_clip: float | None = field(
        default=20.0, metadata={"help": "Clip |logp_T - logp_S| per token to this value (> 0; null: no clip)."}
    )
    teacher_timeout_s: float = field(default=300.0, metadata={"help": "Per request timeout of a teacher server."})
    teacher_max_retries: int = field(default=3, metadata={"help": "Retries before a teacher server error is fatal."})
    teacher_batch_size: int = field(default=8, metadata={"help": "Sequences per teacher forward/request."})

    # --- budget ------------------------------------------------------------------------------------------------
    max_train_seconds: float | None = field(
        default=None,
        metadata={"help": "Wall-clock budget of train(), seconds: training ends after the first optimizer step past "
                  "it, saved as after a normal end (the learning-rate schedule stays max_steps'; the run summary's "
                  "time_budget_stop_step says where). Rollbacks of the collapse guard count against it. null: none."},
    )

    # --- in-training evaluation on the trainer's eval_dataset (arc_trl/eval/callback.py, docs/evaluation.md) -----
    eval_every_steps: int = field(
        default=0, metadata={"help": "Play the held-out tasks (the trainer's eval_dataset; arc-trl train: the "
                             "eval_dataset key) every this many optimizer steps (0: off)."}
    )
    eval_n_predictions: int = field(
        default=defaults.EVAL_N_PREDICTIONS, metadata={"help": "Attempts per held-out task (pass@k up to this k)."}
    )
    eval_max_tasks: int | None = field(
        default=defaults.EVAL_MAX_TASKS,
        metadata={"help": "Held-out tasks per evaluation: the first ones of eval_dataset (None: all)."}
    )
    eval_temperature: float = field(
        default=defaults.TEMPERATURE, metadata={"help": "Sampling temperature of the evaluation."}
    )
    eval_at_start: bool = field(
        default=True, metadata={"help": "Also evaluate once before the first step (a baseline), when eval is on."}
    )
    eval_save_completions: bool = field(
        default=True, metadata={"help": "Write each evaluation's attempts to output_dir/eval_arc/step_N.jsonl."}
    )

    # --- collapse guard (arc_trl/collapse/, docs/collapse.md) ------------------------------------------------------
    collapse_guard: str = field(
        default="warn",
        metadata={"help": "off | warn (label each step ok/warn/collapse, log why) | stop (save, write the reason to "
                  "output_dir/collapse_guard_stop.json, exit 3: trainer.train() raises CollapseStopped) | rollback "
                  "(resume from the last ok checkpoint with the learning rate scaled by collapse_lr_scale; after "
                  "collapse_max_rollbacks, stop)."},
    )
    collapse_max_rollbacks: int = field(default=3, metadata={"help": "Rollbacks before the guard stops the run."})
    collapse_lr_scale: float = field(
        default=0.5, metadata={"help": "Learning-rate multiplier applied at each rollback (1.0: keep it)."}
    )
    collapse_baseline_steps: int = field(
        default=20, metadata={"help": "Non-collapse logged steps in the detector's baseline (the run's first ones) "
                              "and its healthy level (the last ones)."}
    )
    collapse_window: int = field(default=10, metadata={"help": "Logged steps averaged into each current value."})
    collapse_min_signals: int = field(
        default=2, metadata={"help": "Metrics at collapse level needed together to label a step `collapse`."}
    )
    collapse_thresholds: dict | str | None = field(
        default=None,
        metadata={"help": "Per-signal overrides, a mapping (YAML) or JSON: {metric or metric:direction: {warn, "
                  "collapse, change, floor, sudden} or null to drop; no_valid_left / all_truncated / "
                  "reward_at_floor: {value, healthy} or null}. Defaults: arc_trl/collapse/detector.py."},
    )

    # --- debugging ------------------------------------------------------------------------------------------------
    dump_rollouts: int = field(
        default=0, metadata={"help": "Write this many rollouts per generation step to output_dir/rollouts/ (JSONL: "
                             "task, conversation, last output, verdicts, reward and its parts, tokens; "
                             "`arc-trl view` draws them)."}
    )
    wandb_episodes_every_steps: int = field(
        default=50, metadata={"help": "Every this many optimizer steps (and at step 0), a W&B table of "
                              "`wandb_episodes` episodes: grids as images, code, output, reward and its parts "
                              "(with report_to wandb); 0: never."}
    )
    wandb_episodes: int = field(default=4, metadata={"help": "Episodes in each W&B episode table (a group's first "
                                                              "one first)."})
    no_signal_warn_steps: int = field(
        default=5, metadata={"help": "Warn when this many logged steps in a row had no learning signal (every GRPO "
                             "group's rewards equal: reward std 0); 0: never."}
    )
    dump_rollout_tokens: bool = field(
        default=True, metadata={"help": "Keep the token arrays (prompt and completion ids, env mask, sampler "
                                "log-probs, per-token advantages) in the rollout dumps; false: text and grids only."}
    )
    peak_tflops: float | None = field(
        default=None,
        metadata={"help": "Peak FLOP/s of one device in TFLOP/s for the logged MFU (default: a table of known GPUs, "
                  "bf16 dense: H100/H200 989, A100 312; no MFU on CPU without it)."},
    )
    benchmark_full_turns: bool = field(
        default=False,
        metadata={"help": "Measurements only, never training: every model turn generates exactly its token cap and "
                  "ends with the template's end-of-turn token (vLLM min_tokens + logit_bias), so even a random-init "
                  "model, which writes no code, produces the config's longest multi-turn episodes (docs/memory.md). "
                  "Needs use_vllm and rollout_scheduling: lockstep."},
    )
    defer_old_logps: bool = field(
        default=False,
        metadata={"help": "Skip TRL's no-grad forward that recomputes the old log-probs for vLLM's importance-sampling "
                  "correction (a full forward over the generation batch: ~8-10 percent of a step, docs/benchmarks.md) "
                  "and take them from the training forward's detached log-probs instead, as TRL does without vLLM. "
                  "Exact only when the policy does not change between scoring and the loss: needs num_iterations: 1 "
                  "and gradient_accumulation_steps a multiple of steps_per_generation, and not loss_type: vespo or "
                  "off_policy_mask_threshold. Applies with use_vllm and vllm_importance_sampling_correction."},
    )
    length_grouped_micro_batches: bool = field(
        default=True,
        metadata={"help": "Split each generation batch into micro-batches of episodes of similar length, each trimmed "
                  "to its own longest (less padding in the loss forwards, docs/benchmarks.md). Applied only where "
                  "it leaves the loss of an optimizer step unchanged (arc_trl/trainer/micro_batches.py); the "
                  "trimming of all-padding columns always applies."},
    )
    check_loss_mask: bool = field(
        default=True, metadata={"help": "Fail loudly when a batch has no trainable (model) tokens."}
    )

    def sandbox_config(self) -> SandboxConfig:
        """The `SandboxConfig` of these settings (the limits not set here keep SandboxConfig's defaults)."""
        from arc_trl.sandbox.config import SandboxConfig

        return SandboxConfig(
            timeout_s=self.sandbox_timeout_s, wall_timeout_s=self.sandbox_wall_timeout_s,
            memory_mb=self.sandbox_memory_mb, max_output_chars=self.sandbox_max_output_chars,
            disk_mb=self.sandbox_disk_mb, max_files=self.sandbox_max_files, idle_memory_mb=self.sandbox_idle_memory_mb,
            check_transform=self.check_transform,
        )

    def __post_init__(self) -> None:
        type_problems = field_type_problems(self)  # first: the checks below assume the annotated types
        if type_problems:
            raise ValueError("wrong value types:\n  " + "\n  ".join(type_problems))
        checks = {
            "agent_mode": (self.agent_mode, AGENT_MODES),
            "reward_mode": (self.reward_mode, REWARD_MODES),
            "teacher_backend": (self.teacher_backend, TEACHER_BACKENDS),
            "teacher_loss": (self.teacher_loss, TEACHER_LOSSES),
            "teacher_privileged": (self.teacher_privileged, PRIVILEGED_INFO),
            "rollout_scheduling": (self.rollout_scheduling, ROLLOUT_SCHEDULINGS),
        }
        for name, (value, allowed) in checks.items():
            if value not in allowed:
                raise ValueError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        check_choices(self.vllm_rollout_dtype, self.vllm_kv_cache_dtype)
        kv_cache_memory_kwargs(self.vllm_kv_cache_memory_gib)  # > 0, or None
        if not self.vllm_request_timeout_s > 0:
            raise ValueError(f"vllm_request_timeout_s must be > 0 (seconds), got {self.vllm_request_timeout_s}")
        if self.max_train_seconds is not None and not self.max_train_seconds > 0:
            raise ValueError(f"max_train_seconds must be > 0 (seconds) or null, got {self.max_train_seconds}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.agent_mode == "program":
            self.max_turns = 1
        if self.teacher_tau < 0 or self.adv_tau < 0:
            raise ValueError("teacher_tau and adv_tau must be >= 0")
        if self.teacher_logprob_clip is not None and not self.teacher_logprob_clip > 0:
            raise ValueError(
                f"teacher_logprob_clip must be > 0 (or null: no clip), got {self.teacher_logprob_clip}: a clip of 0 "
                "would zero every teacher log-ratio, switching the teacher term off without a word"
            )
        # (The converse is allowed: a teacher with zero weight is still scored and logged, teacher_kl, for monitoring.)
        if self.teacher_tau > 0 and self.teacher_backend == "none":
            *others, last = (name for name in TEACHER_BACKENDS if name != "none")
            raise ValueError(f"teacher_tau > 0 needs a teacher: set teacher_backend to {', '.join(others)} or {last}")
        needs = TEACHER_BACKENDS[self.teacher_backend].needs
        if needs and not getattr(self, needs[0]):
            raise ValueError(f"teacher_backend={self.teacher_backend} needs {needs[0]} ({needs[1]})")
        self._check_peer_teacher()
        if self.async_rollouts not in (0, 1):
            raise ValueError(f"async_rollouts={self.async_rollouts} is not 0 (synchronous) or 1 (one step off-policy): "
                             "a lag of 2 or more steps is not supported (docs/async.md)")
        self._check_collapse_guard()
        if self.adv_tau == 0 and self.teacher_tau == 0:
            raise ValueError("adv_tau and teacher_tau are both 0: the loss would be empty")

    def check_with(self, args) -> None:
        """The checks that need TRL's `GRPOConfig` `args` too (ValueError naming the key), and a warning for each key
        set without effect (arc_trl/config/ineffective_keys.py)."""
        self._check_async_rollouts(args)
        defaults = {f.name: f.default for f in fields(self)} | {"use_vllm": False, "vllm_mode": "colocate"}  # TRL's
        warn_ineffective_keys({**vars(self), "use_vllm": bool(args.use_vllm),
                               "vllm_mode": getattr(args, "vllm_mode", "colocate")}, defaults)
        warn_sequence_is(self.vllm_rollout_dtype, bool(args.use_vllm),
                         bool(getattr(args, "vllm_importance_sampling_correction", True)),
                         str(getattr(args, "vllm_importance_sampling_mode", "sequence_mask")))
        if not self.defer_old_logps:
            return
        steps_per_generation = args.steps_per_generation or args.gradient_accumulation_steps
        problems = []
        if args.num_iterations != 1:
            problems.append(f"num_iterations: 1 (got {args.num_iterations})")
        if args.gradient_accumulation_steps % steps_per_generation:
            problems.append(f"gradient_accumulation_steps a multiple of steps_per_generation (got "
                            f"{args.gradient_accumulation_steps} and {steps_per_generation})")
        if args.loss_type == "vespo":
            problems.append("a loss_type other than vespo (it reads the importance-sampling ratio itself)")
        if args.off_policy_mask_threshold is not None:
            problems.append(f"off_policy_mask_threshold unset (got {args.off_policy_mask_threshold})")
        if problems:
            raise ValueError("defer_old_logps: true is exact only when the policy does not change between scoring "
                             "and the loss; it needs " + "; ".join(problems))

    def _check_async_rollouts(self, args) -> None:
        if not self.async_rollouts:
            return
        steps_per_generation = args.steps_per_generation or args.gradient_accumulation_steps
        problems = []
        if not args.use_vllm or args.vllm_mode != "server":
            problems.append(f"use_vllm: true and vllm_mode: server (got use_vllm={args.use_vllm}, "
                            f"vllm_mode={args.vllm_mode}; a colocated engine shares the trainer's GPU and process)")
        if args.num_iterations != 1:
            problems.append(f"num_iterations: 1 (got {args.num_iterations})")
        if steps_per_generation != args.gradient_accumulation_steps:
            problems.append(f"steps_per_generation = gradient_accumulation_steps, one generation per optimizer step "
                            f"(got {steps_per_generation} and {args.gradient_accumulation_steps})")
        if not args.vllm_importance_sampling_correction:
            problems.append("vllm_importance_sampling_correction: true (it corrects the one-step lag)")
        if getattr(args, "vllm_structured_outputs_regex", None):
            problems.append("no vllm_structured_outputs_regex (the background rollout's per-request generation does "
                            "not apply it)")
        if str(getattr(args, "eval_strategy", "no")).split(".")[-1].lower() != "no":
            problems.append(f"eval_strategy: no (got {args.eval_strategy}; Trainer's evaluation would push weights "
                            "under a background rollout: use eval_every_steps, the ARC evaluation, instead)")
        if problems:
            raise ValueError("async_rollouts: 1 needs " + "; ".join(problems))

    def _check_peer_teacher(self) -> None:
        if self.teacher_backend == "policy" and self.teacher_privileged == "none":
            raise ValueError("teacher_backend=policy with teacher_privileged=none: the teacher would be the student "
                             "itself, a zero teacher term; give it a privileged prompt (peer, solutions or program)")
        if self.teacher_privileged != "peer":
            return
        if self.teacher_backend == "server":
            raise ValueError("teacher_privileged=peer with teacher_backend=server: a server scores episodes as they "
                             "finish, before their group is complete and rewarded, so no peer is known yet; use "
                             "teacher_backend policy, base or local (docs/opd.md, 'Peer teacher')")
        if self.peer_max_chars < 1:
            raise ValueError(f"peer_max_chars must be >= 1, got {self.peer_max_chars}")

    def _check_collapse_guard(self) -> None:
        from arc_trl.collapse.settings import detector_settings, parse_thresholds

        if self.collapse_guard not in COLLAPSE_ACTIONS:
            raise ValueError(f"collapse_guard={self.collapse_guard!r} is not one of {', '.join(COLLAPSE_ACTIONS)}")
        if self.collapse_max_rollbacks < 0:
            raise ValueError(f"collapse_max_rollbacks must be >= 0, got {self.collapse_max_rollbacks}")
        if not 0 < self.collapse_lr_scale <= 1:
            raise ValueError(f"collapse_lr_scale must be in (0, 1], got {self.collapse_lr_scale}")
        self.collapse_thresholds = parse_thresholds(self.collapse_thresholds)
        detector_settings(self)  # validates the rules and window sizes now, not at the first step
