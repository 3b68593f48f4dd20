"""Where a GRPO + OPD step's time goes, finer than the logged step budget (`time/*`).

    python benchmarks/profile_step.py --out profile.json -- --config configs/gpu/learning/grpo-opd.yaml --max_steps 6

Everything after `--` is `scripts/train.py`'s command line: the run is the real one (same trainer, rollout, sandbox,
teacher, vLLM). On top of the step budget, each step records the wall time (device synchronised at both ends) of:

- `logps_no_grad`: TRL's no-grad log-prob forwards while scoring a generation batch (old log-probs for the vLLM
  importance-sampling correction, a reference model);
- `forward`: the loss forward of each micro-batch (log-probs + entropy, with grad), `backward`: its backward;
- `optimizer`: `optimizer.step` (and zero_grad), from the Trainer's `on_pre_optimizer_step` to `on_optimizer_step`;
- `teacher_score`: the teacher's forwards (or its server's wait);
- `rewards`: TRL's reward computation;
- `vllm_generate`, `vllm_wake`, `vllm_sleep`: the colocated engine's calls (generate per turn, sleep mode);
- `weight_sync`: pushing the weights into vLLM;

and the padding of the training batches: real (attended) tokens over the padded `batch x length` tensors the loss
forwards see. With `--torch-profile-step N`, step N also runs under torch.profiler: the device's kernel time against
the step's wall time (the rest is the device waiting on Python, the sandbox or the CPU), and the top kernels.
Sub-phases nest inside the step budget's buckets (e.g. `forward` + `backward` + `logps_no_grad` + `rewards` +
`optimizer` are inside `train`), so they add up to less than `time/step`; what is left is Python between them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch
from transformers import TrainerCallback


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class SubPhases:
    """Wall time per label for the current step (device synchronised around each timed call)."""

    def __init__(self) -> None:
        self.step: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.tokens = {"real": 0.0, "padded": 0.0}
        self._depth = 0

    @contextmanager
    def timed(self, label: str):
        if self._depth:  # nested call of a timed method (e.g. a retried forward): charge only the outer one
            yield
            return
        self._depth += 1
        _sync()
        t = time.perf_counter()
        try:
            yield
        finally:
            _sync()
            self.step[label] += time.perf_counter() - t
            self.calls[label] += 1
            self._depth -= 1

    def wrap(self, obj, name: str, label) -> None:
        """Time `obj.name` (instance attribute); `label` is a string or a callable giving it per call."""
        method = getattr(obj, name, None)
        if method is None:
            return

        def timed(*args, **kwargs):
            with self.timed(label() if callable(label) else label):
                return method(*args, **kwargs)

        setattr(obj, name, timed)

    def reset(self) -> dict:
        out = {"seconds": dict(self.step), "calls": dict(self.calls), **self._padding()}
        self.step, self.calls = defaultdict(float), defaultdict(int)
        self.tokens = {"real": 0.0, "padded": 0.0}
        return out

    def _padding(self) -> dict:
        real, padded = self.tokens["real"], self.tokens["padded"]
        return {"train_tokens_real": real, "train_tokens_padded": padded,
                "train_padding_frac": (1 - real / padded) if padded else None}


class ProfileCallback(TrainerCallback):
    """Collects the sub-phases per step and runs torch.profiler over one step."""

    def __init__(self, phases: SubPhases, torch_profile_step: int | None, out: dict) -> None:
        self.phases, self.torch_step, self.out = phases, torch_profile_step, out
        self._opt = None
        self._profiler = None

    def on_step_begin(self, args, state, control, **kwargs):
        self.phases.reset()
        if self.torch_step is not None and state.global_step + 1 == self.torch_step:
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            self._profiler = profile(activities=acts)
            self._profiler.__enter__()
            self._wall = time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._opt = self.phases.timed("optimizer")
        self._opt.__enter__()

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self._opt is not None:
            self._opt.__exit__(None, None, None)
            self._opt = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "time/step" in logs and self.out["steps"]:  # the step budget of the step just ended
            self.out["steps"][-1]["budget"] = {k: v for k, v in logs.items() if k.startswith(("time/", "mfu"))}

    def on_step_end(self, args, state, control, **kwargs):
        record = {"step": state.global_step, **self.phases.reset()}
        if self._profiler is not None:
            _sync()
            wall = time.perf_counter() - self._wall
            self._profiler.__exit__(None, None, None)
            record["torch_profile"] = summarise_profile(self._profiler, wall)
            self._profiler = None
        self.out["steps"].append(record)


def summarise_profile(prof, wall_s: float, top: int = 25) -> dict:
    """Device kernel time vs the step's wall time, and the top kernels by device time."""
    events = prof.key_averages()

    def device_us(e) -> float:
        return float(getattr(e, "self_device_time_total", 0.0) or getattr(e, "self_cuda_time_total", 0.0) or 0.0)

    kernels = sorted(events, key=device_us, reverse=True)
    total_device_s = sum(device_us(e) for e in events) / 1e6
    return {
        "wall_s": wall_s,
        "device_kernel_s": total_device_s,
        "device_busy_frac": total_device_s / wall_s if wall_s else None,
        "top_kernels": [{"name": e.key[:120], "device_s": device_us(e) / 1e6, "calls": e.count}
                        for e in kernels[:top] if device_us(e) > 0],
    }


def instrument(trainer, phases: SubPhases) -> None:
    """Time the trainer's sub-phases (instance attributes only: the classes are untouched)."""
    phases.wrap(trainer, "_get_per_token_logps_and_entropies",
                lambda: "forward" if torch.is_grad_enabled() else "logps_no_grad")
    phases.wrap(trainer.accelerator, "backward", "backward")
    phases.wrap(trainer, "_calculate_rewards", "rewards")
    if getattr(trainer, "teacher", None) is not None:
        phases.wrap(trainer.teacher, "score", "teacher_score")
    vllm = getattr(trainer, "vllm_generation", None)
    if vllm is not None:
        phases.wrap(vllm, "sync_weights", "weight_sync")
        llm = getattr(vllm, "llm", None)
        if llm is not None:
            phases.wrap(llm, "generate", "vllm_generate")
            phases.wrap(llm, "wake_up", "vllm_wake")
            phases.wrap(llm, "sleep", "vllm_sleep")
    compute_loss = trainer.compute_loss

    from arc_trl.trainer.micro_batches import trim_padding  # what the trainer's loss forward computes on

    def counted(model, inputs, *args, **kwargs):
        if model.training:
            trimmed = trim_padding(inputs)
            ids = torch.cat([trimmed["prompt_mask"], trimmed["completion_mask"]], dim=1)
            phases.tokens["padded"] += float(ids.numel())
            phases.tokens["real"] += float(ids.sum())
        return compute_loss(model, inputs, *args, **kwargs)

    trainer.compute_loss = counted


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="JSON file for the per-step sub-phases and the run's step budget")
    p.add_argument("--torch-profile-step", type=int, default=None, help="run this step under torch.profiler")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="-- then scripts/train.py's arguments")
    a = p.parse_args()
    train_args = a.train_args[1:] if a.train_args[:1] == ["--"] else a.train_args

    import arc_trl.trainer as trainer_module
    from arc_trl import train_entry

    out: dict = {"train_args": train_args, "steps": []}
    phases = SubPhases()
    base = trainer_module.ArcGRPOTrainer

    class ProfiledTrainer(base):  # the run's own trainer, instrumented after TRL has built it
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            instrument(self, phases)
            self.add_callback(ProfileCallback(phases, a.torch_profile_step, out))

    trainer_module.ArcGRPOTrainer = ProfiledTrainer
    summary = train_entry.main(train_args)
    out["run_summary"] = summary
    if torch.cuda.is_available():
        out["device"] = torch.cuda.get_device_name(0)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    out["summary"] = format_profile(out)
    Path(a.out).write_text(json.dumps(out, indent=1, default=str))
    print(out["summary"])


def format_profile(out: dict, skip_first: int = 1) -> str:
    """Mean seconds per sub-phase and step-budget bucket over the steps after the first `skip_first` (warm-up) and
    not run under torch.profiler, one line each."""
    steps = [s for s in out["steps"][skip_first:] if "torch_profile" not in s] or out["steps"]
    if not steps:
        return "no step recorded"
    labels = sorted({k for s in steps for k in s["seconds"]})
    lines = [f"sub-phases, mean of steps {steps[0]['step']}-{steps[-1]['step']}:"]
    for label in labels:
        mean = sum(s["seconds"].get(label, 0.0) for s in steps) / len(steps)
        calls = sum(s["calls"].get(label, 0) for s in steps) / len(steps)
        lines.append(f"  {label:15s} {mean:7.3f} s  ({calls:.1f} calls)")
    budget = sorted({k for s in steps for k in s.get("budget", {})})
    for key in budget:
        mean = sum(s.get("budget", {}).get(key, 0.0) for s in steps) / len(steps)
        lines.append(f"  {key:15s} {mean:7.3f}")
    pad = [s["train_padding_frac"] for s in steps if s.get("train_padding_frac") is not None]
    if pad:
        lines.append(f"  padding: {100 * sum(pad) / len(pad):.1f}% of the training tensors' tokens")
    for s in out["steps"]:
        if "torch_profile" in s:
            tp = s["torch_profile"]
            lines.append(f"  step {s['step']} under torch.profiler: device kernels {tp['device_kernel_s']:.2f} s of "
                         f"{tp['wall_s']:.2f} s wall ({100 * (tp['device_busy_frac'] or 0):.0f}% busy)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
