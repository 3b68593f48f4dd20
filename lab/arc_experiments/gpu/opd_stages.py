"""Issue 41's OPD experiment (configs/gpu/smollm2/opd-*.yaml, docs/opd.md "On a GPU"), first planned as two H100
sessions of under 50 minutes, each from its own SFT student (as the committed SmolLM2 experiment: machine 1 chose the
recipes, machine 2 ran the held-out arms from a student of its own), run on one H200 (validation, split over
machines) and a pair of H200s (docs/opd.md):

1. `opd-validation`: the student, the RL-trained teacher (opd-teacher.yaml), each arm's validation sweep; records
   under OUT/opd/validation (commit them into results/gpu_learning_smollm2/opd/validation before step 2); an arm whose
   committed sweep finished is kept, one with a lost run is run whole (its runs compared on one student);
2. `opd-heldout`: the student, the teacher again (kept if this machine's validation part trained it), each arm with its
   chosen recipe x 3 seeds (or `--seeds`) and GRPO alone beside them on the held-out tasks; records under
   OUT/opd/heldout and the figures (OUT/opd/summary.json, opd_report.py).

Runs go `--slots` at a time on a GPU (default 2; each colocated vLLM with a fixed 6 GiB KV cache, a run ~10 GiB: six
took 59.8 GiB of an H200), on every GPU of a machine with several (`pool_gpus`); a run that needs the teacher waits for
it. In opd-heldout the teacher trains alone on a GPU (on one GPU first; on several, the arms that need no teacher start
on the others meanwhile), the arms' runs in seed-major order (s0_* of every arm, then s1_*, s2_*), so each held-out
run shares the GPU only with other arms' held-out runs (its record names them:
`neighbours`) and its step times (`wall_s`) can be read against theirs. Each run is stopped at its time limit
(opd_budget.LIMIT_FACTOR x its estimate; exit code 124) and the stage goes on.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from arc_experiments.gpu.measure_stages import PY
from arc_experiments.gpu.opd_budget import CONFIG_S, LIMIT_FACTOR, PAIR, calibration, estimate_lines, run_cost
from arc_experiments.gpu.runner import ROOT, Context, failed, first_step, pool_gpus, run, start, stop
from arc_experiments.learning.opd_records import ARMS, RL_ARMS, TEACHER_GROUP, run_record, save_record

SLOTS = 2  # runs at once on a GPU unless --slots says otherwise
TEACHER = "opd-teacher.yaml"
HELDOUT = "opd-heldout.yaml"
COMMITTED = Path("results/gpu_learning_smollm2/opd")  # where step 1's records are committed


@dataclass
class Job:
    name: str
    run: str  # the sweep's run name
    config: Path  # its config.yaml (written by `arc-trl sweep --dry-run`)
    output_dir: Path
    group: str  # its records' folder (opd_records.py)
    arm: str
    needs: tuple[str, ...] = ()
    limit_s: float = 1800.0  # stopped then (exit code 124); the stages set LIMIT_FACTOR x the run's estimate
    seed: int = 0  # its training seed
    alone: bool = False  # starts on an empty GPU and has it to itself while it runs


def _sweep_jobs(sweep_file: Path, prefix: str, group: str, arm: str | None = None,
                needs: str | None = None, alone: bool = False, slots: int = SLOTS) -> list[Job]:
    """One job per run of a sweep file (expanded here: the names and folders `arc-trl sweep` writes); `arm`: the
    sweep's arm, else each run's variant; `needs`: the job that runs of the RL-teacher arms wait for; `alone`: its runs
    have the GPU to themselves (their time limit: opd_budget's lone estimate, else beside another run, and with
    `slots` > 2 runs on a GPU that many halves of it: a GPU that two runs keep busy shares itself among more)."""
    from arc_trl.launch.sweep import expand_sweep, load_sweep

    wall = calibration(ROOT).wall(run_cost(sweep_file, ROOT), alone)
    limit_s = LIMIT_FACTOR * wall * (1 if alone else max(1.0, slots / PAIR))
    jobs = []
    for r in expand_sweep(load_sweep(sweep_file)):
        run_arm = arm or r.variant
        jobs.append(Job(f"{prefix}-{r.name}", r.name, r.config_path, r.output_dir, group, run_arm,
                        (needs,) if needs and run_arm in RL_ARMS else (), round(limit_s), int(r.config.get("seed", 0)),
                        alone))
    return jobs


def _configs(ctx: Context, sweep_file: Path, name: str) -> int:
    return run(ctx, name, 300, [PY, "-m", "arc_trl", "sweep", str(sweep_file), "--dry-run", "--command",
                                f"{PY} -m arc_trl train"])


def _record(ctx: Context, job: Job, part: str, code: int, neighbours: list[str]) -> None:
    """The ended job's record under OUT/opd/PART (what a machine taken back mid-queue leaves), with its exit code and
    the runs that shared the GPU with it at some point (`neighbours`, run names: what its step times were measured
    beside)."""
    config = yaml.safe_load(job.config.read_text())
    record = run_record(job.run, job.group, job.arm, config, job.output_dir)
    save_record({**record, "exit_code": code, "neighbours": neighbours}, ctx.out / "opd", part)


def _fixed_kv_cache(job: Job) -> bool:
    """Whether the job's config fixes its vLLM KV cache (`vllm_kv_cache_memory_gib`: no start-up memory profile, so
    no race with a neighbour starting or sleeping at the same time)."""
    return bool(job.config.exists() and (yaml.safe_load(job.config.read_text()) or {}).get("vllm_kv_cache_memory_gib"))


def pool(ctx: Context, jobs: list[Job], part: str, gpus: tuple[str, ...] = ("",)) -> list[int]:
    """Run `jobs` ctx.slots at a time on each of `gpus` in their order, each once the jobs it needs have finished (a job
    whose need failed is skipped, exit code 2; one finished on an earlier call is kept), each stopped at its
    `limit_s` (`stop`: exit code 124), each ended one's record written at once with its exit code and its neighbours
    (the runs that shared its GPU at some point). `gpus`: ("",) for the one GPU of the process's environment, else
    nvidia-smi's numbers, a job on the GPU with the fewest running (CUDA_VISIBLE_DEVICES); jobs start in their order
    (`_free_gpu`: an `alone` job waits for an empty GPU and keeps it to itself). A job starts once the GPU's newest
    run has logged a step (its vLLM memory taken, vLLM's compile cache written), except on a GPU whose first run has
    logged one when the job and every run on the GPU fix their KV cache: it starts at once (no memory profile to
    race; the cache is warm)."""
    codes = {j.name: 0 for j in jobs if (j.output_dir / "run_summary.json").exists() and not ctx.dry_run}
    pending = [j for j in jobs if j.name not in codes]
    running: dict[str, tuple[Job, subprocess.Popen | None, float, str]] = {}
    beside: dict[str, list[str]] = {}
    last_started: dict[str, tuple[Path, subprocess.Popen | None]] = {}  # per GPU: its newest run's log and process
    warm: set[str] = set()  # GPUs whose first run of this pool has logged a step
    while pending or running:
        for job, process, started, _ in list(running.values()):
            if process is not None and process.poll() is None:
                if time.time() - started <= job.limit_s:
                    continue
                print(f"   {job.name}: still running at its limit of {job.limit_s:.0f} s: stopped", flush=True)
                stop(process)
                code = 124
            else:
                code = 0 if process is None else process.returncode
            codes[job.name] = code
            del running[job.name]
            if not ctx.dry_run:
                _record(ctx, job, part, code, beside[job.name])
        for job in [j for j in pending if any(codes.get(n, 0) != 0 for n in j.needs)]:
            print(f"   {job.name}: skipped, it needs {', '.join(job.needs)}, which failed", flush=True)
            codes[job.name] = 2
            pending.remove(job)
        ready = [j for j in pending if all(n in codes for n in j.needs)]
        load = {gpu: [entry for entry in running.values() if entry[3] == gpu] for gpu in gpus}
        gpu = _free_gpu(ready[0], load, ctx.slots) if ready else None
        if ready and gpu is not None:
            job = ready[0]
            pending.remove(job)
            at_once = gpu in warm and all(_fixed_kv_cache(j) for j in [job] + [e[0] for e in load[gpu]])
            if gpu in last_started and not at_once:
                log, process = last_started.pop(gpu)
                first_step(log, process)  # its vLLM has taken its memory before another starts on the GPU
                if process is None or process.returncode is None:  # (first_step polled it) one dead at start
                    warm.add(gpu)  # wrote no compile cache
            env = {"CUDA_VISIBLE_DEVICES": gpu} if gpu else None
            process = start(ctx, job.name, [PY, "-m", "arc_trl", "train", "--config", str(job.config)], env)
            beside[job.name] = [other.run for other, *_ in load[gpu]]
            for other, *_ in load[gpu]:
                beside[other.name].append(job.run)
            running[job.name] = (job, process, time.time(), gpu)
            last_started[gpu] = (ctx.work / "logs" / f"{job.name}.log", process)
        elif not running and pending:  # waiting on a need that is no job here
            raise SystemExit(f"opd: {[j.name for j in pending]} need {sorted({n for j in pending for n in j.needs})}")
        elif running and not ctx.dry_run:
            time.sleep(5)
    return [codes[j.name] for j in jobs]


def _free_gpu(job: Job, load: dict[str, list], slots: int) -> str | None:
    """The GPU `job` starts on now (`load`: GPU -> its running (job, process, start, GPU) entries): the least loaded
    of those with a free slot and no `alone` run, and for an `alone` job an empty one; None: none yet."""
    free = [g for g, entries in load.items() if len(entries) < slots and not any(e[0].alone for e in entries)
            and not (job.alone and entries)]
    return min(free, key=lambda g: len(load[g])) if free else None


def _student(ctx: Context) -> int:
    """The SFT student (kept if made), on the first GPU of several: HF's Trainer would otherwise split its batch over
    every visible GPU (DataParallel), a student unlike one GPU's."""
    gpus = pool_gpus(ctx)
    return run(ctx, "opd-student", ctx.limit, ctx.demo("--only", "student", "--with-needs"),
               env={"CUDA_VISIBLE_DEVICES": gpus[0]} if gpus[0] else None)


def _files(ctx: Context) -> tuple[Path, Path]:
    """The configs folder and the experiment's folder on the machine (the teacher sweep's sweep_dir's parent: the
    configs' paths are absolute, so --work must be the one they name)."""
    from arc_trl.launch.sweep import load_sweep

    configs = ROOT / ctx.configs
    missing = [n for n in (TEACHER, HELDOUT, *(f"opd-sweep-{a}.yaml" for a in ARMS)) if not (configs / n).exists()]
    if missing:
        raise SystemExit(f"opd: {ctx.configs} lacks {missing} (configs/gpu/smollm2 has them); pass --configs")
    student = yaml.safe_load((configs / "grpo-opd.yaml").read_text())["model_name_or_path"]
    if not ctx.dry_run and Path(student) != ctx.learning / "student":
        raise SystemExit(f"opd: {ctx.configs}/grpo-opd.yaml trains {student}, not this --work's student "
                         f"{ctx.learning / 'student'}")
    return configs, load_sweep(configs / TEACHER).sweep_dir.parent


def _print_estimate(ctx: Context, title: str, files: list[tuple[Path, int]], commands: int,
                    alone: tuple[Path, ...] = ()) -> None:
    """The stage's estimate on one H100 (opd_budget's calibration: two runs a GPU): `alone`'s runs each alone on the
    GPU, `files`' runs (a sweep file and how many of its runs run here) two at a time."""
    cal = calibration(ROOT)
    parts = [("student", cal.student_s)] + [(f"{f.stem} alone", cal.alone(run_cost(f, ROOT))) for f in alone]
    parts += [(f.stem, cal.runs(replace(run_cost(f, ROOT), runs=n))) for f, n in files if n]
    for line in estimate_lines(parts + [("commands", commands * CONFIG_S)], title):
        print(line, flush=True)
    if ctx.slots != PAIR:
        print(f"   (--slots {ctx.slots}: the estimate is for {PAIR} runs a GPU on an H100; docs/opd.md has an H200's "
              "figures at 6)", flush=True)


VALIDATION_ORDER = ("opd-peer", "grpo-only", "opd-rl-mixed", "opd-rl-pure")


def validation_arms(only: str | None) -> tuple[bool, list[str]]:
    """Whether opd-validation was asked for the teacher itself (its student-teacher gap), and which arms' sweeps it
    runs: all, or those `only` names (comma-separated shell patterns over `teacher` and the arms), so that the stage
    can be split over machines (docs/opd.md). An RL-teacher arm's runs train the teacher first whether asked or not."""
    return asked_arms(only, "opd-validation")


def asked_arms(only: str | None, stage: str) -> tuple[bool, list[str]]:
    """(teacher asked for, arms asked for) of `--only`'s comma-separated shell patterns over `teacher` and the arms;
    none: everything. A pattern that matches nothing is an error naming the stage."""
    if not only:
        return True, list(VALIDATION_ORDER)
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    unknown = [p for p in patterns if not fnmatch.filter((TEACHER_GROUP, *VALIDATION_ORDER), p)]
    if unknown:
        raise SystemExit(f"{stage} --only {only!r}: {unknown} match none of "
                         f"{', '.join((TEACHER_GROUP, *VALIDATION_ORDER))}")
    arms = [a for a in VALIDATION_ORDER if any(fnmatch.fnmatch(a, p) for p in patterns)]
    return any(fnmatch.fnmatch(TEACHER_GROUP, p) for p in patterns), arms


def committed_folder() -> Path:
    """The committed records (COMMITTED in the checkout)."""
    return ROOT / COMMITTED


def committed_runs(part: str = "validation") -> set[tuple[str, str]]:
    """(group, run) of the committed records (COMMITTED/PART) whose run finished (exit code 0)."""
    from arc_experiments.learning.opd_records import finished_runs, read_records

    return finished_runs(read_records(committed_folder()).get(part, {}))


def opd_validation(ctx: Context) -> int:
    """Issue 41's validation part: the student, the RL-trained teacher (GRPO alone, 128 steps) and each arm's
    validation sweep (GRPO alone, peer self-teacher, RL teacher pure and mixed), records under OUT/opd/validation.
    `--only`: some of them (validation_arms), e.g. on two machines whose time is short, `teacher,opd-rl-*` on one
    and `grpo-only,opd-peer` on the other. An arm whose committed runs all finished is kept; one with a lost run runs
    its whole sweep again (a choice compares runs of one student, and a new machine builds its own); the teacher
    trains when asked for and not committed, or when an RL-teacher arm runs (its checkpoint is never committed), or on
    several GPUs when this machine's held-out part follows (`opd-heldout` among the command's stages): then on a GPU
    of its own beside the sweeps, and its record is the held-out part's (`_file_under_heldout`)."""
    configs, work = _files(ctx)
    asked_teacher, arms = validation_arms(ctx.only)
    done = committed_runs()
    # on several GPUs the teacher has one to itself, and trains here too when this machine's held-out part follows
    # (it needs one): beside the sweeps on the other GPUs instead of after them
    gpus = pool_gpus(ctx)
    several = len(gpus) > 1
    teacher = _sweep_jobs(configs / TEACHER, "opd-teacher", TEACHER_GROUP, "rl-teacher", alone=several,
                          slots=ctx.slots)
    sweeps = {arm: configs / f"opd-sweep-{arm}.yaml" for arm in arms}
    runs = {arm: _sweep_jobs(f, arm, arm, arm, teacher[0].name, slots=ctx.slots) for arm, f in sweeps.items()}
    for arm in [a for a, jobs in runs.items() if all((j.group, j.run) in done for j in jobs)]:
        print(f"   {arm}: kept (every run's committed record finished)", flush=True)
        del runs[arm]
    jobs = [j for arm_jobs in runs.values() for j in arm_jobs]
    needed_here = any(j.needs for j in jobs) or (asked_teacher and (TEACHER_GROUP, teacher[0].run) not in done)
    for_heldout = several and "opd-heldout" in ctx.stages and not needed_here
    with_teacher = needed_here or for_heldout
    trained = [(configs / TEACHER, 1)] * with_teacher + [(sweeps[arm], len(js)) for arm, js in runs.items()]
    _print_estimate(ctx, "opd-validation", trained, commands=len(trained) + 1)
    codes = [_student(ctx)] + [_configs(ctx, f, f"{f.stem}-configs") for f, _ in trained]
    codes += pool(ctx, teacher * with_teacher + jobs, "validation", gpus=gpus)
    records = [PY, "-m", "arc_experiments.learning.opd_records", "write", str(work), "--part",
               "validation", "--out", str(ctx.out / "opd")]
    codes.append(run(ctx, "opd-validation-records", 300, records))
    if for_heldout and not ctx.dry_run:
        _file_under_heldout(ctx.out / "opd", teacher[0].run, teacher_record_name(ctx.seeds))
    return failed(*codes)


def _file_under_heldout(opd: Path, run: str, name: str) -> None:
    """Move the teacher's validation record (OPD/validation/teacher/RUN.json) to the held-out part as NAME: a teacher
    trained only for the held-out part, whose record over the committed validation teacher's would change the
    validation figures (its student is another machine's)."""
    source = opd / "validation" / TEACHER_GROUP / f"{run}.json"
    if source.exists():
        record = {**json.loads(source.read_text()), "run": name}
        save_record(record, opd, "heldout")
        source.unlink()


def merged_records(here: Path, into: Path, dry_run: bool = False) -> Path:
    """A part's records as the figures read them: the committed ones (COMMITTED/PART, PART = `here`'s name), those of
    this machine (`here`: e.g. validation runs a first machine lost, held-out seeds another machine did not run) over
    them, copied into `into` (emptied first)."""
    if not dry_run:
        shutil.rmtree(into, ignore_errors=True)
        into.mkdir(parents=True)
        for source in (committed_folder() / here.name, here):
            if source.is_dir():
                shutil.copytree(source, into, dirs_exist_ok=True)
    return into


def opd_heldout(ctx: Context) -> int:
    """Issue 41's held-out part: the student, the RL-trained teacher again (alone on a GPU; kept if trained already on
    this machine), each arm with its validation-chosen recipe x 3 seeds (`--seeds`: some, the others on another
    machine) and GRPO alone beside them on the held-out tasks, `--slots` at a time on each GPU in seed-major order (the
    RL-teacher arms once the teacher has finished), the records and the figures (OUT/opd)."""
    configs, work = _files(ctx)
    asked = asked_arms(ctx.only, "opd-heldout")[1]  # --only: some arms, e.g. when the session's time is short
    if not asked:  # the teacher alone: its record is validation's (opd-validation --only teacher)
        raise SystemExit(f"opd-heldout --only {ctx.only!r}: no arm asked for; the teacher trains here only for the "
                         f"RL-teacher arms ({', '.join(RL_ARMS)})")
    template = yaml.safe_load((configs / HELDOUT).read_text())
    seeds = template["grid"]["seed"]
    unknown = sorted(set(ctx.seeds or ()) - set(seeds))
    if unknown:
        raise SystemExit(f"opd-heldout --seeds: {unknown} not in {configs / HELDOUT}'s seeds {seeds}")
    with_teacher = any(arm in RL_ARMS for arm in asked)  # the teacher trains when an asked arm needs it
    runs = sum(v["name"] in asked for v in template["variants"]) * len(ctx.seeds or seeds)
    _print_estimate(ctx, "opd-heldout", [(configs / HELDOUT, runs)], commands=3 + with_teacher,
                    alone=(configs / TEACHER,) * with_teacher)
    opd, report = ctx.out / "opd", work / "choices"  # the report reads both parts, committed and this machine's
    choices = merged_records(opd / "validation", report / "validation", ctx.dry_run)
    arms_file = work / "heldout.yaml"
    codes = [_student(ctx)]
    if with_teacher:
        codes.append(_configs(ctx, configs / TEACHER, "opd-teacher-configs"))
    codes.append(run(ctx, "opd-arms-file", 300, [PY, "-m", "arc_experiments.learning.opd_records", "arms-file",
                                                 "--validation", str(choices), "--template", str(configs / HELDOUT),
                                                 "--out", str(arms_file)]))
    if codes[-1]:
        return codes[-1]  # no recipes: nothing to run
    codes.append(_configs(ctx, arms_file, "opd-heldout-configs"))
    teacher = _sweep_jobs(configs / TEACHER, "opd-teacher", TEACHER_GROUP, "rl-teacher", alone=True)
    teacher[0].run = teacher_record_name(ctx.seeds)
    # a dry run has no arms file: the template gives the same runs (only learning_rate and teacher_tau differ);
    # seed-major: s0_* of every arm first; --seeds: only those seeds' runs (the others on another machine)
    arms = sorted(_sweep_jobs(configs / HELDOUT if ctx.dry_run else arms_file, "opd-heldout", "arms",
                              needs=teacher[0].name, slots=ctx.slots), key=lambda j: j.name)
    arms = [j for j in arms if (ctx.seeds is None or j.seed in ctx.seeds) and j.arm in asked]
    teacher = teacher * with_teacher
    # the teacher alone on a GPU (on one GPU: before every arm, the runs start in order), the arms beside other arms'
    # held-out runs only (module docstring); on several GPUs the arms without a teacher start on the others meanwhile
    codes += pool(ctx, teacher + arms, "heldout", gpus=pool_gpus(ctx))
    records = [PY, "-m", "arc_experiments.learning.opd_records", "write", str(work), "--part", "heldout", "--out",
               str(opd), "--teacher-run", teacher_record_name(ctx.seeds)]
    codes.append(run(ctx, "opd-heldout-records", 300, records))
    merged_records(opd / "heldout", report / "heldout", ctx.dry_run)
    codes.append(run(ctx, "opd-report", 300, [PY, "-m", "arc_experiments.learning.opd_report", str(report),
                                              "--out", str(opd / "summary.json")]))
    return failed(*codes)


def teacher_record_name(seeds: tuple[int, ...] | None) -> str:
    """The held-out teacher's record name: `rl-teacher`, or with --seeds `rl-teacher-s0-2` (the teacher of those
    seeds' runs: machines that split the seeds each train their own, and each record is kept)."""
    return "rl-teacher" + (f"-s{'-'.join(map(str, seeds))}" if seeds else "")
