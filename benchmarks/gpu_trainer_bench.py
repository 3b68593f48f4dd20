"""The ArcGRPOTrainer training step on GPU: step time, tokens/s, peak memory per GPU, MFU; first-step loss/grad-norm.

    accelerate launch --config_file accelerate_configs/single_gpu.yaml benchmarks/gpu_trainer_bench.py --shape qwen3-8b --lora --gradient-checkpointing
    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 2 benchmarks/gpu_trainer_bench.py --shape qwen3-0.6b

A random-init Qwen3 of a real shape is built on every rank from the same seed. Generation is replaced by a fixed,
deterministic batch (prompt + completion tokens of exactly `--seq-len`, fixed advantages), so every launch
configuration trains on the same global batch: step-1 loss, grad norm and entropy can be compared across single
GPU, ZeRO-2 and ZeRO-3, and the timed part is the trainer's forward/backward (TRL's `step_time`, optimizer excluded).

MFU = model FLOPs / (step time x GPUs x peak), model FLOPs per token = 6 x (matmul parameters) + 12 x layers x
hidden x seq_len (attention), the PaLM convention. With LoRA + gradient checkpointing the hardware also does ~6N per
token (forward, recomputed forward, activation gradients; no weight gradients of frozen weights), so the same count
is used. Peak = 989 TFLOP/s (H100/H200 SXM dense bf16).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PEAK_FLOPS = 989e12


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="qwen3-0.6b")
    p.add_argument("--lora", action="store_true")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--global-batch", type=int, default=16, help="sequences per optimizer step, all GPUs together")
    p.add_argument("--micro-batch", type=int, default=None, help="sequences per forward on one GPU (default: all)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--out", default=None, help="write the results as JSON here (main process)")
    p.add_argument("--cpu", action="store_true", help="smoke-test the script on CPU (tiny shape)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    import torch
    from accelerate import PartialState
    from datasets import Dataset
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl import GRPOConfig

    from arc_trl.config import ArcConfig
    from arc_trl.models.tiny_model import TinyModelSpec, build_tokenizer, shape_spec
    from arc_trl.trainer import ArcGRPOTrainer

    state = PartialState()
    world = state.num_processes
    device = "cpu" if args.cpu else f"cuda:{state.local_process_index}"
    spec = shape_spec(args.shape) if args.shape != "tiny" else TinyModelSpec()
    tokenizer = build_tokenizer()
    tokenizer.padding_side = "left"
    config = Qwen3Config(
        vocab_size=spec.vocab_size, hidden_size=spec.hidden_size, intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers, num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads, head_dim=spec.head_dim,
        max_position_embeddings=max(spec.max_position_embeddings, args.seq_len),
        tie_word_embeddings=spec.tie_word_embeddings, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    dtype = torch.float32 if args.cpu else torch.bfloat16
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(dtype)
    model.config.use_cache = False
    n_params = sum(p.numel() for p in model.parameters())
    n_matmul = n_params - (0 if spec.tie_word_embeddings else spec.vocab_size * spec.hidden_size)

    num_generations = 4
    per_device = args.global_batch // world
    micro = args.micro_batch or per_device
    grad_accum = per_device // micro
    prompts = [[{"role": "user", "content": f"task {i}"}] for i in range(4 * args.global_batch)]
    dataset = Dataset.from_dict({"prompt": prompts, "task_id": [f"t{i}" for i in range(len(prompts))],
                                 "task_json": ["{}"] * len(prompts)})
    grpo = GRPOConfig(
        output_dir=f"/tmp/gpu_bench_{args.shape}", per_device_train_batch_size=micro,
        gradient_accumulation_steps=grad_accum, steps_per_generation=grad_accum, num_generations=num_generations,
        max_completion_length=args.seq_len - args.prompt_len, max_steps=args.steps, learning_rate=1e-5,
        bf16=not args.cpu, use_cpu=args.cpu, gradient_checkpointing=args.gradient_checkpointing,
        logging_steps=1, save_strategy="no", report_to=[], seed=0, beta=0.0, loss_type="dapo",
        disable_dropout=True,
    )
    peft_config = None
    if args.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, task_type="CAUSAL_LM",
                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                 "down_proj"])
    arc = ArcConfig(sandbox_workers=1, log_reward_components=False)
    trainer = ArcGRPOTrainer(model, grpo, arc, train_dataset=dataset, processing_class=tokenizer,
                             peft_config=peft_config)

    completion_len = args.seq_len - args.prompt_len
    advantages_by_k = [1.0, -0.5, 0.25, 0.75]

    def fixed_batch(inputs):
        """Deterministic stand-in for generation: same global batch under every launch configuration."""
        rows = []
        for j, row in enumerate(inputs):
            k = j % num_generations  # the RepeatSampler keeps each prompt's copies together
            g = torch.Generator().manual_seed(zlib.crc32(f"{row['task_id']}-{k}".encode()))
            ids = torch.randint(10, 2000, (args.seq_len,), generator=g)
            rows.append((ids, advantages_by_k[k]))
        ids = torch.stack([r[0] for r in rows]).to(trainer.accelerator.device)
        n = len(rows)
        batch = {
            "prompt_ids": ids[:, : args.prompt_len],
            "prompt_mask": torch.ones(n, args.prompt_len, dtype=torch.long, device=ids.device),
            "completion_ids": ids[:, args.prompt_len :],
            "completion_mask": torch.ones(n, completion_len, dtype=torch.long, device=ids.device),
            "advantages": torch.tensor([r[1] for r in rows], device=ids.device),
        }
        batch["num_items_in_batch"] = trainer.accelerator.gather(batch["completion_mask"].sum()).sum()
        return batch

    trainer._generate_and_score_completions = fixed_batch
    torch.cuda.reset_peak_memory_stats() if not args.cpu else None
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if not args.cpu else 0.0
    peaks = trainer.accelerator.gather(torch.tensor([peak], device=trainer.accelerator.device)).tolist()
    logs = [h for h in trainer.state.log_history if "loss" in h and "step_time" in h]
    step_times = [h["step_time"] for h in logs]
    timed = step_times[1:] if len(step_times) > 1 else step_times  # step 1 includes warm-up
    step_time = sum(timed) / len(timed)
    tokens = args.global_batch * args.seq_len
    flops_per_token = 6 * n_matmul + 12 * spec.num_hidden_layers * spec.hidden_size * args.seq_len
    result = {
        "shape": args.shape, "params": n_params, "lora": args.lora, "gradient_checkpointing": args.gradient_checkpointing,
        "gpus": world, "distributed": str(state.distributed_type), "seq_len": args.seq_len,
        "global_batch": args.global_batch, "micro_batch": micro, "grad_accum": grad_accum,
        "step1_loss": logs[0]["loss"], "step1_grad_norm": logs[0]["grad_norm"], "step1_entropy": logs[0]["entropy"],
        "losses": [h["loss"] for h in logs], "grad_norms": [h["grad_norm"] for h in logs],
        "step_time_s": step_time, "tokens_per_s": tokens / step_time,
        "peak_mem_gib_per_gpu": peaks, "mfu": flops_per_token * tokens / step_time / (world * PEAK_FLOPS),
        "wall_s": wall, "device": torch.cuda.get_device_name() if not args.cpu else "cpu",
    }
    if state.is_main_process:
        print(json.dumps(result, indent=1))
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=1))
    trainer.close()


if __name__ == "__main__":
    main()
