"""results/gpu_step_summary.json from `benchmarks/profile_step.py` outputs: per step shape, the run after a change and
the baseline run before it, measured on one GPU machine one right after the other (issue 25).

    python benchmarks/step_summary.py --date 2026-11-24 --out results/gpu_step_summary.json \\
        --shape qwen3_0.6b_learning BASELINE.json AFTER.json --shape qwen3_8b_recipe BASELINE.json AFTER.json
    (`--not-measured NAME=WHY` records a shape that has no before/after run yet; `--target NAME=step_s=45,train_mfu=0.3`
    records a shape's target and whether the run after the change met it.)

Figures are means over the steps after the first (warm-up) that did not run under torch.profiler. `train_mfu` is the
step's MFU over the training phase alone (`mfu x time/step / time/train`; the same FLOP count).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def measured_steps(profile: dict[str, Any], skip_first: int = 1) -> list[dict[str, Any]]:
    """The steps that count: after the warm-up, not under torch.profiler, with a logged step budget."""
    steps = [s for s in profile["steps"][skip_first:] if "torch_profile" not in s and s.get("budget")]
    if not steps:
        raise ValueError(f"no measured step in the profile of {profile.get('train_args')}")
    return steps


def shape_figures(profile: dict[str, Any], skip_first: int = 1) -> dict[str, Any]:
    """step_s, each time/* part, mfu, train_mfu, peak_gib, padding and device of one profile_step.py run."""
    steps = measured_steps(profile, skip_first)

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    keys = sorted({k for s in steps for k in s["budget"] if k.startswith("time/")})
    parts = {key: mean([s["budget"][key] for s in steps if key in s["budget"]]) for key in keys}
    mfu = mean([s["budget"]["mfu"] for s in steps if s["budget"].get("mfu") is not None])
    step, train = parts.get("time/step"), parts.get("time/train")
    padding = [s["train_padding_frac"] for s in steps if s.get("train_padding_frac") is not None]
    peak = ((profile.get("run_summary") or {}).get("peak_memory_gib") or {}).get("device_peak")
    return {
        "step_s": step,
        **parts,
        "mfu": mfu,
        "train_mfu": round(mfu * step / train, 4) if mfu is not None and step and train else None,
        "peak_gib": peak,
        "train_padding_frac": mean(padding),
        "steps_measured": [s["step"] for s in steps],
        "device": profile.get("device"),
    }


TARGET_KEYS = ("step_s", "train_mfu", "peak_gib")  # step_s and peak_gib: at most; train_mfu: at least


def parse_target(text: str) -> dict[str, float]:
    """`step_s=45,train_mfu=0.3,peak_gib=70` -> the bounds of a shape's target (step and peak: at most; MFU: at
    least)."""
    bounds = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key not in TARGET_KEYS:
            raise ValueError(f"target {text!r}: unknown key {key!r} (known: {', '.join(TARGET_KEYS)})")
        try:
            bounds[key] = float(value)
        except ValueError:
            raise ValueError(f"target {text!r}: {key} needs a number, got {value!r}") from None
    return bounds


def target_verdicts(row: dict[str, Any], bounds: dict[str, float]) -> dict[str, Any]:
    """`target_*` (the bound) and `target_*_met` of each bounded figure, and `target_met` (all of them)."""
    out: dict[str, Any] = {}
    for key, bound in bounds.items():
        value = row.get(key)
        met = value is not None and (value >= bound if key == "train_mfu" else value <= bound)
        out[f"target_{key}"], out[f"target_{key}_met"] = bound, met
    out["target_met"] = all(out[f"target_{key}_met"] for key in bounds)
    return out


def summary(shapes: dict[str, tuple[dict, dict]], date: str, commands: dict[str, str] | None = None,
            targets: dict[str, dict[str, float]] | None = None) -> dict:
    """The summary of each shape's (baseline, after) profiles; `baseline_*` keys hold the run before the change,
    `target_*` the shape's target (`targets`) and whether the run after the change met it."""
    out: dict[str, Any] = {}
    for name, (baseline, after) in shapes.items():
        now, before = shape_figures(after), shape_figures(baseline)
        if now["device"] != before["device"]:
            raise ValueError(f"{name}: baseline on {before['device']}, after on {now['device']}: not comparable")
        out[name] = {
            **now,
            "date": date,
            **{f"baseline_{key}": value for key, value in before.items() if key not in ("device",)},
            "speedup": round(before["step_s"] / now["step_s"], 3) if now["step_s"] else None,
            "command": (commands or {}).get(name),
        }
        if (targets or {}).get(name):
            out[name].update(target_verdicts(out[name], targets[name]))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", nargs=3, action="append", metavar=("NAME", "BASELINE_JSON", "AFTER_JSON"), required=True)
    p.add_argument("--date", required=True)
    p.add_argument("--command", action="append", default=[], metavar="NAME=COMMAND",
                   help="the command that produced a shape's figures")
    p.add_argument("--not-measured", action="append", default=[], metavar="NAME=WHY",
                   help="a shape without a before/after run, and why (written as such, no figures)")
    p.add_argument("--target", action="append", default=[], metavar="NAME=KEY=V[,KEY=V]",
                   help="a shape's target, e.g. qwen3_8b_recipe=step_s=45,train_mfu=0.3,peak_gib=70")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    shapes = {name: (json.loads(Path(b).read_text()), json.loads(Path(x).read_text())) for name, b, x in a.shape}
    commands = dict(item.split("=", 1) for item in a.command)
    try:
        targets = {name: parse_target(bounds) for name, _, bounds in (item.partition("=") for item in a.target)}
    except ValueError as error:
        p.error(str(error))
    unknown = sorted(set(targets) - set(shapes))
    if unknown:
        p.error(f"--target for shapes without a --shape: {unknown}")
    result = summary(shapes, a.date, commands, targets)
    missing = {name: {"not_measured": why} for name, why in (item.split("=", 1) for item in a.not_measured)}
    Path(a.out).write_text(json.dumps(result | missing, indent=1) + "\n")
    for name, row in result.items():
        print(f"{name}: {row['baseline_step_s']} s -> {row['step_s']} s ({row['speedup']}x), train MFU "
              f"{row['baseline_train_mfu']} -> {row['train_mfu']}, peak {row['baseline_peak_gib']} -> {row['peak_gib']} "
              f"GiB on {row['device']}" + ("" if "target_met" not in row else f"; target met: {row['target_met']}"))


if __name__ == "__main__":
    main()
