"""Time estimates of issue 41's OPD stages on one H100, from the committed SmolLM2 machines (results/
gpu_learning_smollm2/):

- the student (model import + SFT): machine 1's stage seconds (teachers_results.json);
- a training run's share of the queue with two runs on the GPU, `step_s` per optimizer step and `episode_s` per
  in-training evaluation episode: machine 1's sweep (sweep.yaml: 6 runs, 40 steps, 2 x 128 x 4 validation episodes
  each) and machine 2's arms (arms.yaml: 6 runs, 40 steps, 3 x 256 x 4 held-out episodes each), both two at a time,
  each stage's seconds less its own non-training commands (queue logs): two equations in the two unknowns.

- a lone run (nothing beside it on the GPU: opd-heldout's RL-trained teacher): machine 3's lone GRPO run of the arms'
  recipe (machine3_queue.log `arc-agi-1-grpo-only`: 20 steps, no evaluation, 231 s, 4.05 s per step: 150 s outside
  its steps, start-up and save), and per evaluation episode twice the shared share (no lone evaluation inside a run
  was measured; a lone process is no slower per episode than one sharing the GPU, so this is an upper bound).

A run's share includes its start-up, overlapped with the other run's steps; its own wall-clock is about twice its
share. The estimate of a stage is its commands' seconds, its lone runs' wall-clock and the shares of its paired runs
(the GPU kept busy by two runs). A run's time limit (opd_stages.py) is LIMIT_FACTOR x its own estimated wall-clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod
from pathlib import Path

import yaml

from arc_experiments.machine_logs import logs_of

FOLDER = "results/gpu_learning_smollm2"
SETUP_S = 180  # the bundle unpacked and the queue started (lab/gpu_box/queue.sh), outside the stages
CONFIG_S = 20  # an `arc-trl sweep --dry-run` (machines 1-4: 14-23 s); a records or report command: less
PAIR = 2  # runs on the GPU at once in the calibrating stages (and in opd_stages.pool)
LIMIT_FACTOR = 3  # a run stops at 3x its estimated wall-clock: slower neighbours, teacher forwards fit; a hang not
LONE = ("machine3_queue.log", "arc-agi-1-grpo-only")  # the committed lone run of the arms' GRPO recipe


@dataclass(frozen=True)
class RunCost:
    runs: int
    steps: int  # optimizer steps per run
    episodes: int  # in-training evaluation episodes per run

    def share(self, step_s: float, episode_s: float) -> float:
        return self.runs * (self.steps * step_s + self.episodes * episode_s)

    def one(self) -> RunCost:
        """One of the runs."""
        return RunCost(1, self.steps, self.episodes)


@dataclass(frozen=True)
class Calibration:
    student_s: float
    step_s: float  # a run's share per step, two runs on the GPU
    episode_s: float  # a run's share per evaluation episode, two runs on the GPU
    lone_start_s: float  # a lone run's seconds outside its steps
    lone_step_s: float  # a lone run's seconds per step

    def runs(self, cost: RunCost) -> float:
        """The GPU seconds of `cost`'s runs, two at a time (their shares)."""
        return cost.share(self.step_s, self.episode_s)

    def alone(self, cost: RunCost) -> float:
        """The wall-clock of `cost`'s runs one after another, each alone on the GPU (module docstring)."""
        return cost.runs * self.lone_start_s + cost.share(self.lone_step_s, PAIR * self.episode_s)

    def wall(self, cost: RunCost, alone: bool) -> float:
        """One run's own wall-clock: alone, or beside another run (PAIR shares)."""
        return self.alone(cost.one()) if alone else PAIR * self.runs(cost.one())


def run_cost(sweep_file: Path, root: Path) -> RunCost:
    """Runs, steps and evaluation episodes of a sweep file (its grid and variants over its base config)."""
    sweep = yaml.safe_load(sweep_file.read_text())
    config = {**yaml.safe_load((root / sweep["base_config"]).read_text()), **(sweep.get("fixed") or {})}
    runs = prod(len(v) for v in (sweep.get("grid") or {}).values()) * max(1, len(sweep.get("variants") or []))
    steps, every = int(config["max_steps"]), int(config.get("eval_every_steps") or 0)
    tasks = int(re.search(r"n=(\d+)", config["eval_dataset"]).group(1)) if every else 0
    evaluations = (steps // every + bool(config.get("eval_at_start"))) if every else 0
    return RunCost(runs, steps, evaluations * tasks * int(config.get("eval_n_predictions") or 0))


def _training_seconds(log: Path, stage: str, commands: tuple[str, ...]) -> float:
    """A queue log's stage seconds (its final table) less those of its named foreground commands (`rc=.. in N s`)."""
    text = log.read_text()
    total = float(re.search(rf"^{re.escape(stage)}\s+\d+\s+(\d+)$", text, re.M).group(1))
    own = sum(float(re.search(rf"^== {re.escape(c)}: .*\n\s+rc=\d+ in (\d+) s", text, re.M).group(1)) for c in commands)
    return total - own


def calibration(root: Path) -> Calibration:
    """The committed machines' figures (module docstring)."""
    import json

    seconds = json.loads((root / FOLDER / "teachers_results.json").read_text())["stage_seconds"]
    configs = root / "configs" / "gpu" / "smollm2"
    sweep, arms = run_cost(configs / "sweep.yaml", root), run_cost(configs / "arms.yaml", root)
    logs = logs_of(root / FOLDER)  # the machines' queue logs
    t1 = _training_seconds(logs / "machine1_queue.log", "sweep", ("shared", "sweep-configs", "sweep-choice"))
    t2 = _training_seconds(logs / "machine2_queue.log", "arms", ("shared", "arms-configs", "arms-report"))
    per1, per2 = t1 / sweep.runs, t2 / arms.runs
    if sweep.steps != arms.steps or sweep.episodes == arms.episodes:
        raise ValueError("the committed sweep and arms runs no longer separate steps from evaluation episodes")
    episode_s = (per2 - per1) / (arms.episodes - sweep.episodes)
    lone_s, lone_steps, lone_step_s = _lone_run(logs_of(root / FOLDER) / LONE[0], LONE[1])
    return Calibration(seconds["model"] + seconds["student"], (per1 - episode_s * sweep.episodes) / sweep.steps,
                       episode_s, lone_s - lone_steps * lone_step_s, lone_step_s)


def _lone_run(log: Path, name: str) -> tuple[float, int, float]:
    """A queue log's foreground training run: its seconds, steps and mean step seconds (`rc=.. in N s`, then
    `[arc-trl] done: N steps`, `[arc-trl] mean step S s`)."""
    found = re.search(rf"^== {re.escape(name)}: .*\n\s+rc=0 in (\d+) s\n\s+\[arc-trl\] done: (\d+) steps .*\n"
                      r"\s+\[arc-trl\] mean step ([\d.]+) s", log.read_text(), re.M)
    if found is None:
        raise ValueError(f"{log}: no finished lone run {name!r} with its steps and mean step")
    return float(found.group(1)), int(found.group(2)), float(found.group(3))


def estimate_lines(parts: list[tuple[str, float]], title: str) -> list[str]:
    """Printable lines: each part's seconds, the total, and with the setup, in minutes."""
    total = sum(s for _, s in parts)
    lines = [f"   estimate {title}: " + ", ".join(f"{name} {s:.0f} s" for name, s in parts)]
    lines.append(f"   estimate {title}: {total:.0f} s = {total / 60:.1f} min of stages, {(total + SETUP_S) / 60:.1f} "
                 f"min with the setup ({SETUP_S} s)")
    return lines
