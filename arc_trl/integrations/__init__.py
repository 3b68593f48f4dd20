"""Where arc-trl meets TRL, vLLM, PEFT and unsloth: the one seam to their private members (`trl_internals`), version
differences (`trl_compat`), vLLM patches and clients (`vllm_cpu`, `vllm_server_client`, `colocated_engine`,
`fp8_rollout`), the LoRA merge for weight sync and the RoPE precision fix under ZeRO-3. Nothing here imports the
trainer, the rollout or the CLI."""
