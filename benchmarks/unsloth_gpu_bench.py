"""GRPO + OPD training steps with `use_unsloth: true` vs the plain PEFT path, on one GPU: step time and peak memory.

    python3 benchmarks/unsloth_gpu_bench.py --model /tmp/qwen3-0.6b-warm --path unsloth --out OUT/unsloth.json
    python3 benchmarks/unsloth_gpu_bench.py --model /tmp/qwen3-0.6b-warm --path peft --out OUT/peft.json
    python3 benchmarks/unsloth_gpu_bench.py --compare OUT/peft.json OUT/unsloth.json   # ratios, as JSON
(benchmarks/unsloth_gpu.sh runs them all, each path in its own process: importing unsloth patches transformers,
peft and torch's checkpointing process-wide, so the baseline must never see it.)

Both paths run the real `scripts/train.py` entry (`arc_trl.train_entry.main`) on the same config: LoRA r=16 on all
linear layers, gradient checkpointing, bf16, REPL episodes on synthetic tasks in the sandbox, GRPO advantage plus the
OPD teacher term with the frozen base model as teacher (`teacher_backend: base`, adapter disabled). Generation goes
through TRL: transformers (`--generation transformers`) or colocated vLLM (`--generation vllm`). The only difference
between the two paths is `use_unsloth` (unsloth's FastLanguageModel, its LoRA layers, "unsloth" checkpointing).

Reported per run, for each optimizer step: wall time, the part spent in `_generate_and_score_completions`
(episodes, rewards, teacher scoring) and the rest (`train_s`: log-prob forward, loss, backward, optimizer), with
medians over the steps after the first (compilation/warm-up); TRL's `step_time` (its `training_step`, which
includes the generation); peak GPU memory
(`torch.cuda.max_memory_allocated` / reserved), the loss/reward/teacher_kl of each step, versions, and which
checkpoint function torch uses (unsloth replaces `torch.utils.checkpoint.checkpoint`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a Qwen3-shape model folder (save_pretrained) with its tokenizer")
    p.add_argument("--path", choices=["unsloth", "peft"], default="unsloth")
    p.add_argument("--generation", choices=["transformers", "vllm"], default="transformers")
    p.add_argument("--teacher", choices=["base", "none"], default="base", help="base: GRPO + OPD; none: GRPO only")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=16, help="episodes per step (per_device_train_batch_size)")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=512)
    p.add_argument("--max-tokens-per-turn", type=int, default=192)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--out", help="write the result JSON here")
    p.add_argument("--run-dir", default=None, help="output_dir of the training run (default: next to --out)")
    p.add_argument("--unsloth-first", action="store_true",
                   help="import unsloth before TRL (ArcGRPOTrainer then subclasses unsloth's patched GRPOTrainer); "
                        "default: the library's order, TRL first, TRL's loss")
    p.add_argument("--cpu", action="store_true", help="smoke-test the script on CPU (peft path, float32, tiny sizes)")
    p.add_argument("--compare", nargs=2, metavar=("PEFT_JSON", "UNSLOTH_JSON"), help="print ratios of two results")
    return p.parse_args(argv)


def train_argv(a, run_dir: str) -> list[str]:
    argv = [
        "--model_name_or_path", a.model, "--output_dir", run_dir, "--seed", "0",
        *(["--dtype", "float32", "--bf16", "false", "--use_cpu", "true"] if a.cpu else ["--dtype", "bfloat16", "--bf16", "true"]),
        "--gradient_checkpointing", "true",
        "--use_peft", "true", "--lora_r", str(a.lora_r), "--lora_alpha", str(2 * a.lora_r), "--lora_dropout", "0.0",
        "--lora_target_modules", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
        "--dataset", "synthetic:n=64,seed=0,difficulty=small", "--agent_mode", "repl", "--reward_mode", "barc",
        "--max_prompt_tokens", "1024", "--max_turns", "2", "--max_tokens_per_turn", str(a.max_tokens_per_turn),
        "--max_completion_length", str(a.max_completion_length), "--sandbox_workers", "8",
        "--num_generations", str(a.num_generations), "--per_device_train_batch_size", str(a.batch),
        "--gradient_accumulation_steps", "1", "--learning_rate", "1e-5", "--beta", "0.0",
        "--max_steps", str(a.steps), "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none",
        "--use_unsloth", "true" if a.path == "unsloth" else "false",
    ]
    if a.teacher == "base":
        argv += ["--teacher_backend", "base", "--teacher_tau", "0.1", "--adv_tau", "1.0"]
    if a.generation == "vllm":
        argv += ["--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.3",
                 "--vllm_max_model_length", str(1024 + a.max_completion_length)]
    else:
        argv += ["--use_vllm", "false"]
    return argv


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "vllm", "unsloth", "unsloth_zoo",
                 "xformers", "bitsandbytes", "torchao"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def run(a) -> dict:
    if a.unsloth_first:
        import unsloth  # noqa: F401  (before transformers/TRL: unsloth patches them, GRPOTrainer included)
    import torch
    from transformers import TrainerCallback

    import arc_trl.trainer as trainer_module
    from arc_trl.train_entry import main

    cuda = torch.cuda.is_available()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    step_ends: list[float] = []
    generate: list[tuple[int, float]] = []  # (global_step when it ran, seconds)
    started: dict[str, float] = {}
    probe: dict = {}

    class Timer(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            sync()
            if cuda:
                probe["mem_after_load_gib"] = round(torch.cuda.memory_allocated() / 2**30, 3)
                torch.cuda.reset_peak_memory_stats()
            started["t"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            sync()
            step_ends.append(time.perf_counter())

    base = trainer_module.ArcGRPOTrainer

    class TimedTrainer(base):  # the entry point builds the trainer itself: add the timer callback to it
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.add_callback(Timer())
            model = self.model
            probe["model_class"] = type(model).__name__
            probe["base_model_class"] = type(getattr(model, "base_model", model)).__name__
            probe["trainable_params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
            probe["checkpoint_fn"] = getattr(torch.utils.checkpoint.checkpoint, "__module__", "?") + "." + getattr(
                torch.utils.checkpoint.checkpoint, "__name__", "?")
            probe["trainer_mro"] = [c.__name__ for c in type(self).__mro__[:4]]

        def _generate_and_score_completions(self, inputs):
            sync()
            t = time.perf_counter()
            try:
                return super()._generate_and_score_completions(inputs)
            finally:
                sync()
                generate.append((self.state.global_step, time.perf_counter() - t))

    trainer_module.ArcGRPOTrainer = TimedTrainer
    run_dir = a.run_dir or str(Path(a.out or "unsloth_bench.json").with_suffix("")) + "_run"
    result: dict = {"path": a.path, "unsloth_first": a.unsloth_first, "generation": a.generation, "teacher": a.teacher, "model": a.model,
                    "steps": a.steps, "episodes_per_step": a.batch, "versions": versions(),
                    "gpu": torch.cuda.get_device_name(0) if cuda else "cpu", "argv": train_argv(a, run_dir)}
    t0 = time.perf_counter()
    try:
        summary = main(train_argv(a, run_dir))
        result["ok"] = True
        result["summary"] = {k: summary.get(k) for k in ("global_step", "first_reward", "last_reward",
                                                         "turns_per_episode", "code_found_rate")}
    except BaseException as exc:  # report what failed, with the figures up to there
        result["ok"] = False
        result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        result["traceback"] = traceback.format_exc()[-6000:]
    finally:
        trainer_module.ArcGRPOTrainer = base
    result["total_s"] = round(time.perf_counter() - t0, 1)
    result.update(probe)
    if "t" in started and step_ends:
        edges = [started["t"], *step_ends]
        wall = [round(b - e, 3) for e, b in zip(edges, edges[1:])]
        result["step_wall_s"] = wall
        result["step_wall_s_median_after_first"] = round(statistics.median(wall[1:] or wall), 3)
        gen = [round(sum(s for g, s in generate if g == i), 3) for i in range(len(wall))]
        train = [round(w - g, 3) for w, g in zip(wall, gen)]
        result["generate_s"], result["train_s"] = gen, train
        result["generate_s_median_after_first"] = round(statistics.median(gen[1:] or gen), 3)
        result["train_s_median_after_first"] = round(statistics.median(train[1:] or train), 3)
    if cuda:
        result["peak_mem_allocated_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        result["peak_mem_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
    state_file = Path(run_dir) / "trainer_state.json"
    if state_file.exists():
        logs = [h for h in json.loads(state_file.read_text())["log_history"] if "step_time" in h or "loss" in h]
        keep = ("step", "loss", "reward", "step_time", "teacher_kl", "grad_norm", "completions/mean_length",
                "episode/turns")
        result["log"] = [{k: h[k] for k in keep if k in h} for h in logs]
        times = [h["step_time"] for h in logs if "step_time" in h]
        if times:
            result["trl_step_time_s"] = [round(t, 3) for t in times]
            result["trl_step_time_s_median_after_first"] = round(statistics.median(times[1:] or times), 3)
    return result


def compare(peft: dict, unsloth: dict) -> dict:
    def ratio(key):
        a, b = peft.get(key), unsloth.get(key)
        return round(b / a, 3) if a and b else None

    return {
        "peft_ok": peft.get("ok"), "unsloth_ok": unsloth.get("ok"),
        "unsloth_error": unsloth.get("error"),
        **{f"{k}_median [peft, unsloth]": [peft.get(f"{k}_median_after_first"), unsloth.get(f"{k}_median_after_first")]
           for k in ("step_wall_s", "generate_s", "train_s")},
        "peak_mem_allocated_gib [peft, unsloth]": [peft.get("peak_mem_allocated_gib"),
                                                   unsloth.get("peak_mem_allocated_gib")],
        "unsloth_over_peft": {k: ratio(k) for k in ("step_wall_s_median_after_first", "generate_s_median_after_first",
                                                    "train_s_median_after_first", "peak_mem_allocated_gib",
                                                    "peak_mem_reserved_gib")},
    }


def cli(argv=None) -> None:
    a = parse_args(argv)
    if a.compare:
        peft, unsloth = (json.loads(Path(p).read_text()) for p in a.compare)
        print(json.dumps(compare(peft, unsloth), indent=2))
        return
    if not a.model:
        raise SystemExit("--model is required")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "disabled")
    result = run(a)
    text = json.dumps(result, indent=2, default=str)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)
    print(text)
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    cli()
