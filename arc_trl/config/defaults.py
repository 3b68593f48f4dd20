"""Every default that more than one place uses, written once: an episode's, the sandbox's and sampling's.

Training (`arc_trl.config.ArcConfig`), the rollout (`arc_trl.rollout.settings.RolloutSettings`), the sandbox
(`arc_trl.sandbox.config.SandboxConfig`), `arc-trl evaluate generate` / `score`
(`arc_trl.eval.generation_settings`), `arc-trl sft` and the in-training evaluation (`arc_trl.eval.callback`) all take
theirs from here, so an episode played in training, in SFT and in evaluation has the same limits unless a config says
otherwise (tests/unit/package/test_defaults.py). This module imports nothing, so every layer can read it.
"""

from __future__ import annotations

# --- an episode --------------------------------------------------------------------------------------------------
AGENT_MODE = "repl"  # the names: arc_trl/config/choices.py
MAX_TURNS = 4
MAX_TOKENS_PER_TURN: int | None = None  # None: the episode budget
MAX_COMPLETION_LENGTH = 1024  # the episode budget outside training; the trainer's is GRPOConfig.max_completion_length
ROLLOUT_SCHEDULING = "lockstep"  # see arc_trl.rollout.arc_rollout.run_episodes
CHAT_TEMPLATE = "auto"  # keep the model's template if prefix-stable, else TRL's training variant

# --- the sandbox (per code run unless stated) ----------------------------------------------------------------------
SANDBOX_TIMEOUT_S = 5.0  # CPU seconds
SANDBOX_MEMORY_MB = 1024  # address space of the interpreter
SANDBOX_MAX_OUTPUT_CHARS = 2000  # per stream (stdout, stderr); what the model reads back
SANDBOX_DISK_MB = 16  # a session's working directory
SANDBOX_MAX_FILES = 1000  # files + folders of a session's working directory
SANDBOX_IDLE_MEMORY_MB: int | None = 128  # resident memory a session may keep between runs
SANDBOX_WORKERS = 4  # code runs in parallel (evaluation: at most the machine's CPUs)

# --- a vLLM server (ArcConfig.vllm_request_timeout_s; arc_trl/integrations/vllm_server_client.py) ---------------
VLLM_REQUEST_TIMEOUT_S = 300.0  # the wait for each answer of a vLLM server (generation, weight push, health)

# --- sampling: the values TRL's GRPOConfig samples with in training (a test holds them equal) ------------------------
TEMPERATURE = 1.0
TOP_P = 1.0
TOP_K = 0  # off
MIN_P = 0.0  # off (GRPOConfig writes None)
REPETITION_PENALTY = 1.0

# --- the in-training evaluation (ArcConfig.eval_*) -------------------------------------------------------------------
EVAL_N_PREDICTIONS = 4
EVAL_MAX_TASKS: int | None = 16
