"""The learning experiment in one command: SFT a student, build teachers, RL it (GRPO + OPD, GRPO alone), evaluate.

    python -m arc_experiments.learning              # the CPU demo: ~10 min on 2 CPU cores (~14 with --ablation)
    python -m arc_experiments.learning --resume     # continue an interrupted run (finished stages are kept)
    python -m arc_experiments.learning --ablation   # also GRPO without the teacher, from the same student
    python -m arc_experiments.learning --configs configs/gpu/learning --out /tmp/arc-gpu/learning   # the GPU experiment
    python -m arc_experiments.learning --configs configs/gpu/learning --list      # its stages, needs and what is done

Every stage runs the project's own entry point (output in OUT/logs/<stage>.log):

  check-heldout  python -m arc_experiments.learning.heldout_check   no held-out task in the SFT, RL or validation sets
  model          arc-trl build-tiny-model                     random-init Qwen3 + local tokenizer
  student        arc-trl sft --config CONFIGS/sft-student.yaml    SFT warm start (reference episodes)
  TEACHER        arc-trl sft --config CONFIGS/<its config>   each teacher of the profile (longer SFT, or SFT on
                                                              privileged prompts)
  eval-NAME      arc-trl evaluate generate                    held-out tasks: the student, each teacher (a privileged
                                                              teacher with its privileged prompt), each RL run
  kl-TEACHER     arc-trl train, learning rate 0               teacher_kl of each teacher on the student's episodes
  RUN            arc-trl train --config CONFIGS/grpo-opd.yaml   per seed: grpo-opd (the OPD teacher) and grpo-only
  eval-RUN-stepN arc-trl evaluate generate                    its checkpoints every `eval_every` steps, then the end

Then OUT/results.json (every evaluation with its per-task pass@1, the training logs, each stage's wall time; written
after every stage, so a run stopped between stages leaves it) and, once a run is complete, the plots
(docs/img/<prefix>_*.png), the generated block of docs/learning.md and (GPU profile) the summary JSON with the
seed-aware intervals (arc_experiments/learning/report.py).

The folder given by `--configs` holds the stage configs (sft-student.yaml, the teachers' SFT configs, grpo-opd.yaml)
and a `profile.yaml` (`DEFAULT_PROFILE` below: model shape, evaluation backend, held-out and validation sets, seeds,
arms, teachers, checkpoint evaluations, docs section): configs/demo is the CPU demo, configs/gpu/learning the GPU
experiment. `--until STAGE` stops after a stage and `--only A,B*` runs only some (shell patterns; `--with-needs` adds
what they need and is not done), to split a run over several device calls or machines, then `--resume`;
`--report results.json [more.json ...]` rewrites the docs block, plots and summary from finished runs' results (the
results of several machines are merged).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arc_experiments.learning.docs_block import DOCS, outcome_line, write_report
from arc_experiments.learning.plan import plan, select_stages
from arc_experiments.learning.profile import CONFIGS, Stage, heldout_spec, load_profile, read_yaml, subject_of
from arc_experiments.learning.results import LoadSampler, collect_results, gpu_name, machine

ROOT = Path(__file__).resolve().parents[3]  # the checkout: stages run its scripts/ with its configs/


def run_stage(stage: Stage, logs: Path) -> float:
    """Run one stage, its output in logs/NAME.log; its seconds. A failure (exit code or no done file) is a
    SystemExit that quotes the end of the log."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{stage.name}.log"
    print(f"[demo] {stage.name}: {' '.join(stage.command[1:])}", flush=True)
    started = time.time()
    with open(log, "w") as f:
        code = subprocess.run(stage.command, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
    seconds = time.time() - started
    if code != 0 or not stage.done_file.exists():
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-25:])
        raise SystemExit(f"[demo] stage {stage.name} failed (exit code {code}); last lines of {log}:\n{tail}")
    print(f"[demo] {stage.name} done in {seconds:.0f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
    return seconds


def run_stages(stages: list[Stage], logs: Path, seconds: dict[str, float] | None = None,
               after_each: Callable[[], Any] | None = None) -> dict[str, float]:
    """Run, in list order, the stages whose done file is missing; seconds of each stage run (also added to `seconds`
    as they finish), then `after_each()`. A failed stage ends the run (SystemExit); the finished ones are kept for
    --resume."""
    seconds = {} if seconds is None else seconds
    for stage in stages:
        if stage.done_file.exists():
            print(f"[demo] {stage.name}: already done ({stage.done_file})")
        else:
            seconds[stage.name] = round(run_stage(stage, logs), 1)
            if after_each is not None:
                after_each()
    return seconds



def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/demo", help="working folder (default outputs/demo)")
    parser.add_argument("--configs", default=str(CONFIGS), help="stage configs + profile.yaml (default configs/demo)")
    parser.add_argument("--until", help="stop after this stage (e.g. grpo-opd); continue later with --resume")
    parser.add_argument("--report", metavar="RESULTS_JSON", nargs="+", help="only rewrite the docs block, plots and "
                        "summary from a run's results.json (e.g. copied back from a GPU machine; several are merged)")
    parser.add_argument("--seed", type=int, default=0, help="model init, SFT, sampling and default RL seed (default 0)")
    parser.add_argument("--seeds", help="RL seeds, comma-separated (default: the profile's `seeds`)")
    parser.add_argument("--heldout-tasks", type=int, help="held-out synthetic tasks (default: the profile's, 96)")
    parser.add_argument("--n-predictions", type=int, help="attempts per held-out task (default: the profile's, 4)")
    parser.add_argument("--eval-every", type=int, help="evaluate RL checkpoints every N steps (default: the profile's)")
    parser.add_argument("--ablation", action="store_true", help="also run GRPO without the teacher")
    parser.add_argument("--only", help="run only these stages (comma-separated shell patterns; what they need must be "
                        "done or listed, or add --with-needs), e.g. model,student,grpo-only,eval-grpo-only")
    parser.add_argument("--with-needs", action="store_true", help="with --only: also run what the stages need and "
                        "is not done (a fresh machine: --only 'grpo-opd-s1,eval-grpo-opd-s1*' --with-needs)")
    parser.add_argument("--list", action="store_true", help="print the stages, their needs and what is done; run none")
    parser.add_argument("--resume", action="store_true", help="keep the finished stages of an earlier run in --out")
    parser.add_argument("--fresh", action="store_true", help="delete --out first")
    parser.add_argument("--no-docs", action="store_true", help="do not touch docs/learning.md and docs/img")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    configs = Path(args.configs)
    profile = load_profile(configs)
    if args.seeds:
        profile["seeds"] = [int(x) for x in args.seeds.split(",")]
    if args.eval_every is not None:
        profile["eval_every"] = args.eval_every
    if args.report:
        from arc_experiments.learning.merge import merge_results

        parts = [json.loads(Path(path).read_text()) for path in args.report]
        results = merge_results(parts) if len(parts) > 1 else parts[0]
        write_report(results, profile)
        print(f"[demo] wrote the {profile['docs_section']} block of {DOCS} and its plots from {', '.join(args.report)}")
        return results
    n_heldout = args.heldout_tasks or profile["heldout_tasks"]
    n_predictions = args.n_predictions or profile["n_predictions"]
    out = Path(args.out)
    stages = plan(out, args.seed, n_heldout, n_predictions, args.ablation, configs, profile)
    if args.list:
        for stage in stages:
            state = "done" if stage.done_file.exists() else "to do"
            print(f"{stage.name:32s} {state:6s} needs: {', '.join(stage.needs) or '-'}")
        return {}
    select_stages(stages, args.until, args.only, args.with_needs)  # a bad selection fails before --fresh deletes
    if args.fresh and out.exists():
        shutil.rmtree(out)
    selected = select_stages(stages, args.until, args.only, args.with_needs)
    if out.exists() and any(p.name != "logs" for p in out.iterdir()) and not args.resume:
        raise SystemExit(f"[demo] {out} already holds a run: pass --resume to continue it or --fresh to start over")
    out.mkdir(parents=True, exist_ok=True)

    results_path = out / "results.json"
    previous = json.loads(results_path.read_text()) if args.resume and results_path.exists() else {}
    stage_seconds: dict[str, float] = previous.get("stage_seconds", {})
    sampler = LoadSampler()
    config = read_yaml(configs / "grpo-opd.yaml")

    def write_results() -> dict[str, Any]:
        """OUT/results.json from every finished stage: after each stage (a GPU machine taken back mid-run leaves it)
        and at the end. Another invocation on the same --out (stages side by side) may have written since this one
        started: its stage seconds are kept."""
        latest = json.loads(results_path.read_text()) if results_path.exists() else {}
        seconds = {**latest.get("stage_seconds", {}), **stage_seconds}  # stage_seconds holds the previous ones
        loads = previous.get("loads", []) + list(sampler.values)
        results = {
            "seed": args.seed, "machine": machine(), "device": gpu_name() or f"CPU ({platform.machine()})",
            "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "subject": subject_of(profile),
            "heldout_dataset": heldout_spec(n_heldout, profile["heldout_seed"], configs),
            "validation_dataset": heldout_spec(profile["validation_tasks"], profile["validation_seed"], configs)
            if profile["validation_tasks"] else None,
            "n_predictions": n_predictions, "temperature": config.get("temperature", 1.0),
            "reward_mode": config["reward_mode"], "stage_seconds": seconds,
            "total_seconds": sum(seconds.values()),
            "loads": loads, "load_mean": sum(loads) / len(loads), "load_max": max(loads),
            **collect_results(out, stages, configs, profile, n_predictions),
        }
        results_path.write_text(json.dumps(results, indent=2))
        return results

    failure = None
    try:
        run_stages(selected, out / "logs", stage_seconds, after_each=write_results)
    except SystemExit as error:  # a failed stage still leaves the results of the finished ones
        failure = error
    sampler.stop()
    results = write_results()
    if failure is not None:
        raise failure
    partial = len(selected) < len(stages)
    if partial:
        print(f"[demo] ran {len(selected)} of {len(stages)} stages (--until/--only); results so far in {results_path}; "
              "continue with --resume")
        return results
    if not args.no_docs:
        write_report(results, profile)
    line = outcome_line(results)
    print(f"{line}; total {results['total_seconds'] / 60:.1f} min; results in {results_path}" if line else
          f"[demo] done; results in {results_path}")
    return results


if __name__ == "__main__":
    main()
