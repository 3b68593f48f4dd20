"""The GPU stages (arc_experiments/gpu) on CPU: the registry, the dry run's commands (every script and config they
name exists; the flags reach them), and a failed stage that does not stop the next one."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from arc_experiments.gpu import stages as stages_mod
from arc_experiments.gpu.collect import collect
from arc_experiments.gpu.__main__ import main
from arc_experiments.gpu.runner import Context
from arc_trl.cli.main import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[3]


def _dry(tmp_path, *names: str, **settings) -> Context:
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work", dry_run=True, **settings)
    for name in names:
        assert stages_mod.STAGES[name](ctx) == 0
    return ctx


def test_arms_names_the_missing_arms_file(tmp_path):
    with pytest.raises(SystemExit, match="configs/gpu/learning/sweep-temperature.yaml"):
        _dry(tmp_path, "temperature")
    with pytest.raises(SystemExit, match="configs/gpu/learning/arms.yaml"):
        _dry(tmp_path, "arms")  # the default experiment has no arms.yaml: configs/gpu/smollm2 has


def test_every_stage_has_a_description_and_list_prints_them(capsys):
    assert main(["--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == list(stages_mod.STAGES)
    assert all(len(stages_mod.describe(name)) > 20 for name in stages_mod.STAGES)


@pytest.mark.parametrize("name", list(stages_mod.STAGES))
def test_a_dry_run_prints_commands_naming_only_files_that_exist(tmp_path, name, capsys):
    flags = {"pieces": ["--only", "eval-*"], "arms": ["--configs", "configs/gpu/smollm2"],
             "arc-agi-1": ["--configs", "configs/gpu/smollm2"],
             "temperature": ["--configs", "configs/gpu/smollm2"], "opd-validation": ["--configs", "configs/gpu/smollm2"],
             "opd-heldout": ["--configs", "configs/gpu/smollm2"]}.get(name, [])
    assert main([name, "--dry-run", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), *flags]) == 0
    printed = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines() if line.startswith("== ")]
    assert printed and not (tmp_path / "work").exists() and not (tmp_path / "out").exists()  # printed, nothing run
    for command in printed:
        tokens = shlex.split(command)
        configs = tokens[tokens.index("--configs") + 1] if "--configs" in tokens else None
        if configs and not configs.startswith(str(tmp_path)):  # the experiment's configs (seedpair: a copy in WORK)
            assert (ROOT / configs / "profile.yaml").exists(), (name, command)
        for arg in tokens:
            for path in re.findall(r"(?:scripts|benchmarks|configs|accelerate_configs)/[\w./-]+\.(?:py|yaml|sh)", arg):
                assert (ROOT / path).exists(), (name, path)
        for sub in re.findall(r"-m arc_trl ([\w-]+)", command):  # `arc-trl SUBCOMMAND` run by the stage's interpreter
            assert sub in SUBCOMMANDS, (name, command)
    assert any(re.search(r"(scripts|benchmarks)/\w+\.(py|sh)|-m arc_(experiments|trl)", c) for c in printed), printed


def test_the_learning_stages_run_the_experiment_with_the_gpu_profile_and_the_flags(tmp_path):
    ctx = _dry(tmp_path, "learning", "control", "seedpair", seed=3)
    joined = [shlex.join(c) for c in ctx.commands]
    assert all("-m arc_experiments.learning --configs" in c or "sweep" in c for c in joined)
    assert "--configs configs/gpu/learning" in joined[0] and "--resume --no-docs" in joined[0]
    assert any("--only 'grpo-only-s3,eval-grpo-only-s3*' --with-needs" in c for c in joined)  # control, --seed 3
    assert any(c.endswith("--only grpo-opd-s3") for c in joined) and any("eval-grpo-only-s3" in c for c in joined)
    with pytest.raises(SystemExit, match="--only"):
        stages_mod.STAGES["pieces"](Context(out=tmp_path, dry_run=True))
    assert "--only 'eval-*' --with-needs" in shlex.join(_dry(tmp_path, "pieces", only="eval-*").commands[0])


def test_profile_variants_become_their_flags_and_unknown_ones_are_named(tmp_path):
    ctx = _dry(tmp_path, "profile", variants=["base", "mb32_pe"])
    last = ctx.commands[-1]
    assert last[last.index("--per_device_train_batch_size") + 1] == "32" and "per_episode" in last
    with pytest.raises(SystemExit, match="unknown variant part"):
        _dry(tmp_path, "profile", variants=["mb33"])


def test_speed_stages_run_the_same_command_from_the_baseline_tree_then_this_one(tmp_path):
    """speed / speed-subject / speed8b: one profile_step.py command per tree, the same train arguments (but for the
    output folders), baseline first; speed8b's variants add their flags and a torch-profiled 4th step."""
    ctx = _dry(tmp_path, "speed", "speed-subject", "speed8b")
    runs = [c for c in ctx.commands if "benchmarks/profile_step.py" in c]

    def train_args(command):
        args = command[command.index("--") + 1:]
        return [a for a in args if not a.startswith(str(tmp_path))]

    names = [Path(c[c.index("--out") + 1]).stem for c in runs]
    assert names == ["speed_06_baseline", "speed_06_after", "speed_subject_baseline", "speed_subject_after",
                     "speed_8b_baseline", "speed_8b_after", "speed_8b_vllm55"]
    for before, after in zip(runs[0:6:2], runs[1:6:2]):
        assert train_args(before) == train_args(after)
    subject = runs[2]
    assert subject[subject.index("--config") + 1] == "configs/gpu/smollm2/grpo-opd.yaml"
    assert subject[subject.index("--model_name_or_path") + 1].endswith("smollm2/student")
    recipe = runs[4]
    assert recipe[recipe.index("--config") + 1] == "configs/qwen3-8b-1gpu-colocate.yaml"
    assert "--benchmark_full_turns" in recipe and recipe[recipe.index("--max_steps") + 1] == "3"
    variant = runs[6]
    assert variant[variant.index("--vllm_gpu_memory_utilization") + 1] == "0.55"
    assert variant[variant.index("--torch-profile-step") + 1] == "4" and variant[variant.index("--max_steps") + 1] == "4"
    stopped = Context(out=tmp_path / "out", work=tmp_path / "work", dry_run=True, variants_8b=["vllm50"])
    with pytest.raises(SystemExit, match="unknown variant part"):
        stages_mod.STAGES["speed8b"](stopped)
    assert stopped.commands == []  # before building the 8B shape


@pytest.mark.parametrize("name", ["speed", "speed-subject", "speed8b"])
def test_speed_stages_without_a_baseline_tree_stop_before_any_work(tmp_path, monkeypatch, name):
    from arc_experiments.gpu import profile_stages

    monkeypatch.setattr(profile_stages, "BASELINE", tmp_path / "no-baseline")
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work")
    with pytest.raises(SystemExit, match=f"{name}: no .baseline/ tree"):
        stages_mod.STAGES[name](ctx)
    assert ctx.commands == [] and not (tmp_path / "work").exists()


def test_unknown_stage_is_refused_with_the_list(capsys):
    with pytest.raises(SystemExit):
        main(["warp", "--out", "x"])
    assert "unknown stage(s) ['warp']" in capsys.readouterr().err


def test_a_failed_stage_is_reported_and_the_next_runs(tmp_path, monkeypatch, capsys):
    from arc_experiments.gpu.runner import run

    calls = []

    def broken(ctx):
        calls.append("broken")
        return run(ctx, "broken", 30, [sys.executable, "-c", "import sys; print('boom'); sys.exit(7)"])

    def fine(ctx):
        calls.append("fine")
        return run(ctx, "fine", 30, [sys.executable, "-c", "print('ok')"])

    monkeypatch.setitem(stages_mod.STAGES, "broken", broken)
    monkeypatch.setitem(stages_mod.STAGES, "fine", fine)
    assert main(["broken", "fine", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]) == 7
    out = capsys.readouterr().out
    assert calls == ["broken", "fine"] and "rc=7" in out and "boom" in out
    assert (tmp_path / "work" / "logs" / "fine.log").read_text() == "ok\n"
    assert (tmp_path / "out" / "logs.tar.gz").exists()  # collected after each stage


def test_a_stage_that_raises_is_reported_and_the_next_runs(tmp_path, monkeypatch, capsys):
    def raises(ctx):
        raise FileNotFoundError("no such config")

    monkeypatch.setitem(stages_mod.STAGES, "raises", raises)
    monkeypatch.setitem(stages_mod.STAGES, "fine", lambda ctx: 0)
    assert main(["raises", "fine", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]) == 1
    table = capsys.readouterr().out.splitlines()[-2:]
    assert table[0].split()[:2] == ["raises", "1"] and table[1].split()[:2] == ["fine", "0"]


def test_control_and_seedpair_keep_their_own_default_seeds(tmp_path):
    joined = " ".join(shlex.join(c) for c in _dry(tmp_path, "control", "seedpair").commands)
    assert "grpo-only-s0,eval-grpo-only-s0*" in joined  # control: seed 0
    assert "--only grpo-opd-s1" in joined and "--only eval-grpo-only-s1" in joined  # seedpair: seed 1


def test_collect_packs_results_logs_states_metrics_and_gpu_memory_into_two_files(tmp_path):
    work = tmp_path / "work"
    files = ["logs/control.log", "logs/gpu_memory.csv", "learning/results.json", "learning/logs/student.log",
             "learning/student/trainer_state.json", "learning/eval/student/metrics.json",
             "learning/eval/student/completions.jsonl", "learning/eval/student/per_attempt.jsonl",
             "learning/sweep/tau0.1/eval_arc/step2.jsonl", "runs/collapse-early-warn/collapse_guard.jsonl"]
    for name in [*files, "learning/student/model.safetensors", "runs/x/checkpoint-2/model.safetensors"]:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("{}")
    ctx = Context(out=tmp_path / "out", work=work)
    written = collect(ctx)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["logs.tar.gz", "results.json"] == sorted(
        p.name for p in written)
    with tarfile.open(tmp_path / "out" / "logs.tar.gz") as tar:
        assert sorted(tar.getnames()) == sorted(files)  # no weights
    smollm2 = Context(out=tmp_path / "out2", work=work, configs="configs/gpu/smollm2")
    (work / "smollm2" / "eval" / "student").mkdir(parents=True)
    (work / "smollm2" / "eval" / "student" / "metrics.json").write_text("{}")
    collect(smollm2)
    with tarfile.open(tmp_path / "out2" / "logs.tar.gz") as tar:  # another experiment's folder
        assert "smollm2/eval/student/metrics.json" in tar.getnames()


def test_module_help_exits_zero():
    result = subprocess.run([sys.executable, "-m", "arc_experiments.gpu", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "usage:" in result.stdout


def test_gpu_memory_is_sampled_while_the_stages_run_and_comes_back(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "bin" / "nvidia-smi"  # prints once; with -lms it samples until it is stopped
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "FakeGPU, 80 GiB $*"\ncase "$*" in *-lms*) while true; do sleep 0.05; done;; esac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{__import__('os').environ['PATH']}")
    csv = tmp_path / "work" / "logs" / "gpu_memory.csv"

    def waits_for_a_sample(ctx):
        for _ in range(100):
            if csv.exists() and csv.read_text():
                return 0
            time.sleep(0.05)
        return 1

    monkeypatch.setitem(stages_mod.STAGES, "fine", waits_for_a_sample)
    assert main(["fine", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]) == 0
    assert "FakeGPU" in capsys.readouterr().out.splitlines()[0]  # the header: versions and the GPU
    samples = csv.read_text()
    assert "memory.used" in samples and "-lms 1000" in samples
    with tarfile.open(tmp_path / "out" / "logs.tar.gz") as tar:
        assert "logs/gpu_memory.csv" in tar.getnames()


def test_a_phase_runs_its_jobs_together_and_records_each_layout(tmp_path, monkeypatch):
    """The jobs of a phase share the machine at once (each waits at a barrier only the other can release), and each
    layout's record carries its own exit code and what ran beside it."""
    import json
    import threading

    from arc_experiments.gpu import multigpu_stages as multigpu

    barrier = threading.Barrier(2, timeout=30)
    ran = []

    def job(ctx, name, gpus, models, steps, limit_s):
        barrier.wait()  # a BrokenBarrierError after 30 s if the jobs ran one after the other
        ran.append((name, gpus))
        return 3 if name == "1gpu-colocate" else 0

    monkeypatch.setattr(multigpu, "_job", job)
    monkeypatch.setattr(multigpu, "GpuPeaks", lambda path: _NoPeaks())
    ctx = Context(out=tmp_path / "out", work=tmp_path / "work")
    code = multigpu._phase(ctx, "F", {"3gpu-server-ddp": "0,1,2", "1gpu-colocate": "3"}, {"8b": "/m"}, 3, 900)
    assert code == 3 and sorted(ran) == [("1gpu-colocate", "3"), ("3gpu-server-ddp", "0,1,2")]
    one = json.loads((tmp_path / "out" / "multigpu" / "layout_1gpu-colocate.json").read_text())
    three = json.loads((tmp_path / "out" / "multigpu" / "layout_3gpu-server-ddp.json").read_text())
    assert (one["exit_code"], one["gpu_ids"], one["beside"]) == (3, ["3"], ["3gpu-server-ddp"])
    assert one["gpu_util_trace"] == [[1.0, 3, 50]] and one["peak_mib_per_gpu"] == {"3": 1024}
    assert (three["exit_code"], three["gpus"], three["beside"]) == (0, 3, ["1gpu-colocate"])


def test_phases_run_in_the_order_asked_and_unknown_ones_are_named():
    from arc_experiments.gpu.multigpu_stages import PHASES, chosen_phases

    assert chosen_phases("F,C") == ["F", "C"] and chosen_phases(None) == list(PHASES)
    with pytest.raises(SystemExit, match=r"unknown phase\(s\) \['ZZ'\]"):
        chosen_phases("C,ZZ")


def test_a_phases_two_learning_jobs_make_the_student_and_copy_their_configs_one_at_a_time(tmp_path, monkeypatch):
    """Phase P starts two arms together; each first makes the student (kept if made), writes the arms' configs and
    copies its seed's config: the second waits for the first (the lock), so the student is never trained twice into
    one folder at once, and each run reads its own copy, which the other job's sweep cannot be rewriting."""
    import threading

    from arc_experiments.gpu import multigpu_stages as multigpu

    ctx = Context(out=tmp_path / "out", work=tmp_path / "work")
    events: list[str] = []

    def student(ctx, gpu, limit_s):
        events.append(f"student {gpu} in")
        time.sleep(0.3)
        events.append(f"student {gpu} out")
        return 0

    def sweep(ctx, name, limit, command):
        config = ctx.learning / "arms" / "s0_grpo-only" / "config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"eval_dataset: written by {name}\n")
        return 0

    monkeypatch.setattr(multigpu, "learning_student", student)
    monkeypatch.setattr(multigpu, "run", sweep)
    monkeypatch.setattr(multigpu, "start", lambda ctx, name, command: None)
    jobs = [threading.Thread(target=multigpu.learning_arm, args=(ctx, arm, gpus, 60.0, 0))
            for arm, gpus in (("server", "0,1"), ("server-async1", "2,3"))]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join()
    assert events in (["student 0 in", "student 0 out", "student 2 in", "student 2 out"],
                      ["student 2 in", "student 2 out", "student 0 in", "student 0 out"])
    copies = {arm: (ctx.work / "server-learning" / f"{arm}.yaml").read_text() for arm in ("server", "server-async1")}
    assert copies == {"server": "eval_dataset: written by arms-configs-server-s0\n",
                      "server-async1": "eval_dataset: written by arms-configs-server-async1-s0\n"}
    records = {arm: json.loads((ctx.out / "multigpu" / f"server_learning_{arm}.json").read_text())
               for arm in ("server", "server-async1")}
    assert records["server"]["eval_dataset"] == "written by arms-configs-server-s0"


def test_the_layouts_pass_their_tensor_parallel_size_and_lag(tmp_path):
    """B keeps machine 1's engine per GPU though the shipped 4-GPU colocated config now runs tensor parallel 2; Z is
    one tensor-parallel-2 engine with the asynchronous rollouts."""
    from arc_experiments.gpu import multigpu_stages as multigpu

    ctx = Context(out=tmp_path / "out", work=tmp_path / "work", dry_run=True)

    def flag(name: str, key: str) -> str | None:
        command = multigpu.layout_command(ctx, name, "0,1,2,3", "/m", 3)
        return command[command.index(key) + 1] if key in command else None

    assert flag("4gpu-colocate", "--vllm_tensor_parallel_size") == "1"
    assert flag("4gpu-colocate-tp2", "--vllm_tensor_parallel_size") == "2"
    assert flag("4gpu-server-tp2-async1", "--vllm_tensor_parallel_size") == "2"
    assert flag("4gpu-server-tp2-async1", "--async_rollouts") == "1" and flag("4gpu-server", "--async_rollouts") == "0"
    assert flag("4gpu-server", "--vllm_tensor_parallel_size") == "1"  # machine 5's row, not the shipped config's
    fp8 = multigpu.layout_command(ctx, "2gpu-server-async1-fp8", "2,3", "/m", 3)
    bf16 = multigpu.layout_command(ctx, "2gpu-server-async1", "0,1", "/m", 3)
    assert [a for a in fp8 if a not in bf16] == ["2,3", "--vllm_rollout_dtype", "fp8", str(ctx.work / "runs" /
                                                 "layout-2gpu-server-async1-fp8")]


class _NoPeaks:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def peaks(self):
        return {"3": 1024}

    def trace(self, gpus):
        return [[1.0, int(gpu), 50] for gpu in gpus]


def test_learning_jobs_name_their_seed_and_layout(tmp_path, capsys):
    """Phase P: seed 0 of the learning subject through the server layout, synchronous and one step off-policy, each
    from its seed's arm config, each writing its own results file."""
    from arc_experiments.gpu import multigpu_stages as multigpu

    ctx = Context(out=tmp_path / "out", work=tmp_path / "work", dry_run=True)
    assert multigpu._phase(ctx, "Q", multigpu.PHASES["Q"], {}, 3, 900) == 0
    commands = [c for c in ctx.commands if "serve" in c]
    assert len(commands) == 2
    sync, lagged = commands
    assert sync[sync.index("--config") + 1].endswith("server-learning/server-s1.yaml")  # its own copy of s1's
    assert lagged[lagged.index("--config") + 1].endswith("server-learning/server-async1-s1.yaml")
    assert all(c[c.index("--eval_every_steps") + 1] == "10" for c in commands)  # scored at steps 0, 10 and 20
    assert "--async_rollouts" not in sync and lagged[lagged.index("--async_rollouts") + 1] == "1"
    assert lagged[lagged.index("--output_dir") + 1].endswith("server-learning/server-async1-s1")
    assert lagged[lagged.index("--gpus") + 1] == "2,3" and sync[sync.index("--gpus") + 1] == "0,1"


def test_gpu_samples_read_nvidia_smis_lines_and_skip_the_rest(tmp_path):
    from datetime import datetime

    from arc_experiments.gpu.multigpu_stages import GpuPeaks

    log = tmp_path / "peaks.csv"
    log.write_text("2026/11/27 08:37:58.500, 0, 52000, 97\n2026/11/27 08:37:58.500, 1, 1200, 0\n"
                   "2026/11/27 08:37:59.000, 0, 53000, [N/A]\n garbage\n2026/11/27 08:37:59.000, 0, 51000, 40\n")
    sampler = GpuPeaks(log)
    t0 = datetime(2026, 11, 27, 8, 37, 58, 500000).timestamp()
    assert sampler.peaks() == {"0": 52000, "1": 1200}  # the [N/A] line is skipped whole
    assert sampler.trace(["0"]) == [[round(t0, 2), 0, 97], [round(t0 + 0.5, 2), 0, 40]]


def test_a_later_start_on_the_same_machine_adds_its_phases_to_the_machine_record(tmp_path, monkeypatch):
    """Each `queue.sh start` of the multigpu stage on one machine writes machine.json: a later one (phase X after
    S,T,U) keeps the earlier phases (it overwrote them, leaving the record naming only the last start's)."""
    import json

    from arc_experiments.gpu import multigpu_stages as multigpu

    monkeypatch.setattr(multigpu, "header", lambda: "torch x | GPU y")
    monkeypatch.setattr(multigpu, "gpu_ids", lambda: ["0", "1"])
    monkeypatch.setattr(multigpu.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "GPU0 GPU1\n"))
    monkeypatch.setattr(multigpu, "shape_8b", lambda ctx: (0, "/m"))
    monkeypatch.setattr(multigpu, "_phase", lambda *a, **k: 0)
    monkeypatch.setattr(multigpu, "collect", lambda ctx: None)
    for only in ("S,T", "U"):
        assert multigpu.multigpu(Context(out=tmp_path / "out", work=tmp_path / "work", only=only)) == 0
    machine = json.loads((tmp_path / "out" / "multigpu" / "machine.json").read_text())
    assert list(machine["phases"]) == ["S", "T", "U"] and machine["phases"]["U"] == multigpu.PHASES["U"]
    assert machine["gpu_count"] == 2


def test_fp8_stages_measure_each_rollout_precision_on_the_same_recipe_and_each_seed(tmp_path):
    ctx = _dry(tmp_path, "fp8-8b", "fp8-sync", "fp8-learning")
    joined = [shlex.join(c) for c in ctx.commands]
    runs = [c for c in joined if "-m arc_trl train --config configs/qwen3-8b-1gpu-colocate.yaml" in c]
    assert [c.split("--output_dir ")[1].rsplit("/", 1)[1] for c in runs] == [
        "8b-rollout-bf16", "8b-rollout-fp8", "8b-rollout-fp8-kv"]
    assert [c.split("--seed 0")[1].split(" --output_dir")[0] for c in runs] == [
        "", " --vllm_rollout_dtype fp8", " --vllm_rollout_dtype fp8 --vllm_kv_cache_dtype fp8"]  # else identical
    assert all("--benchmark_full_turns true" in c and "--max_steps 3" in c for c in runs)
    checks = [c for c in joined if "benchmarks/fp8_sync_check.py" in c]
    # the hook's checks first (what counts, should the machine be taken back), the plain sync's expected failure last
    assert len(checks) == 4 and "--no-hook" in checks[3] and "--kv-cache-dtype fp8" in checks[1]
    assert "--server" in checks[2] and checks[2].endswith("fp8_sync_check_server.json")  # the server's push
    assert not any(flag in checks[0] for flag in ("--no-hook", "--kv-cache-dtype"))
    arms = [c for c in joined if "-m arc_trl serve" in c]
    assert len(arms) == 6 and all("--gpus 0" in c for c in arms)
    for seed in (0, 1, 2):
        name = "colocate" if seed == 0 else f"colocate-s{seed}"  # each run's own copy of its seed's arm config
        fp8, bf16 = ([c for c in arms if f"/{name.replace('colocate', 'colocate-fp8' if flag else 'colocate')}.yaml"
                      in c] for flag in (True, False))
        assert all("--vllm_rollout_dtype fp8" in c for c in fp8) and not any("--vllm_rollout_dtype" in c for c in bf16)
        assert len(fp8) == len(bf16) == 1
        assert fp8[0].replace(" --vllm_rollout_dtype fp8", "").replace("colocate-fp8", "colocate") == bf16[0]


def test_fp8_profile_profiles_the_fp8_weights_run_and_the_fp8_kv_run_of_the_same_recipe_on_a_fixed_port(
        tmp_path, monkeypatch):
    """The KV cache's question (docs/fp8.md): the two FP8 runs differ only in the KV flag, each profiled at its last
    step, on a rendezvous port below the ephemeral ones `--auto-ports` picks for runs beside it on other GPUs."""
    from arc_experiments.gpu import fp8_stages, profile_stages

    ctx = _dry(tmp_path, "fp8-profile")
    joined = [shlex.join(c) for c in ctx.commands]
    assert "build-tiny-model --shape qwen3-8b" in joined[0]
    runs = joined[1:]
    assert [c.split("--out ")[1].split(" ")[0].rsplit("/", 1)[1] for c in runs] == [
        "profile_8b-rollout-fp8.json", "profile_8b-rollout-fp8-kv.json"]
    assert all("benchmarks/profile_step.py" in c and "--torch-profile-step 3" in c and "--max_steps 3" in c and
               "--benchmark_full_turns true" in c and "--config configs/qwen3-8b-1gpu-colocate.yaml" in c for c in runs)
    assert runs[1].split(" -- ")[1].split(" --output_dir")[0] == (
        runs[0].split(" -- ")[1].split(" --output_dir")[0] + " --vllm_kv_cache_dtype fp8")
    assert "--vllm_rollout_dtype fp8" in runs[0]
    envs = []
    monkeypatch.setattr(profile_stages, "run", lambda ctx, name, limit, command, cwd=None, env=None: envs.append(env))
    monkeypatch.setattr(fp8_stages, "shape_8b", lambda ctx: (0, "/m"))
    assert fp8_stages.fp8_profile(Context(out=tmp_path / "out", work=tmp_path / "work")) == 0
    assert [env["MASTER_PORT"] for env in envs] == ["29777", "29777"] and int(fp8_stages.PROFILE_PORT) < 32768
    assert all(env["PYTHONPATH"].split(":")[0] == str(profile_stages.ROOT) for env in envs)


def test_fp8_learning_starts_each_seeds_fp8_run_after_the_bf16_one_has_logged_a_step(tmp_path, monkeypatch):
    """Both runs share the one GPU: the FP8 run's engine must not load and profile its memory while the bf16 run's
    does (the other two-on-one-GPU stages wait for a logged step the same way)."""
    from arc_experiments.gpu import fp8_stages

    events: list[tuple] = []
    monkeypatch.setattr(fp8_stages, "learning_arm",
                        lambda ctx, arm, gpus, limit, seed: events.append(("run", arm, seed)) or 0)
    monkeypatch.setattr(fp8_stages, "first_step", lambda log, process: events.append(("wait", log.name)))
    monkeypatch.setattr(fp8_stages, "learning_student", lambda ctx, gpu, limit: 0)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: [])  # one GPU, whatever this host has
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert fp8_stages.fp8_learning(Context(out=tmp_path / "out", work=tmp_path / "work")) == 0
    for seed, log in ((0, "server-learning-colocate.log"), (1, "server-learning-colocate-s1.log"),
                      (2, "server-learning-colocate-s2.log")):
        assert events.index(("wait", log)) < events.index(("run", "colocate-fp8", seed))
        assert ("run", "colocate", seed) in events
    assert len(events) == 9


def _fake_learning_arms(monkeypatch, fp8_stages):
    """learning_arm replaced by a run that lasts a moment: (arm, gpus, seed) of each, and the most at once per GPU."""
    import threading
    import time as _time

    runs: list[tuple[str, str, int]] = []
    running: dict[str, int] = {}
    most: dict[str, int] = {}
    lock = threading.Lock()

    def fake_arm(ctx, arm, gpus, limit, seed):
        with lock:
            runs.append((arm, gpus, seed))
            running[gpus] = running.get(gpus, 0) + 1
            most[gpus] = max(most.get(gpus, 0), running[gpus])
        _time.sleep(0.2)
        with lock:
            running[gpus] -= 1
        return 0

    monkeypatch.setattr(fp8_stages, "learning_arm", fake_arm)
    monkeypatch.setattr(fp8_stages, "learning_student", lambda ctx, gpu, limit: runs.append(("student", gpu, -1)) or 0)
    monkeypatch.setattr(fp8_stages, "first_step", lambda log, process: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return runs, most


def test_fp8_learning_on_two_gpus_sends_the_seeds_round_them_each_seeds_pair_side_by_side_on_one(tmp_path,
                                                                                                  monkeypatch):
    from arc_experiments.gpu import fp8_stages

    runs, most = _fake_learning_arms(monkeypatch, fp8_stages)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0", "1"])
    assert fp8_stages.fp8_learning(Context(out=tmp_path / "out", work=tmp_path / "work")) == 0
    assert runs[0] == ("student", "0", -1)  # made once, before any run
    assert sorted(runs[1:]) == sorted((arm, gpu, seed) for arm in ("colocate", "colocate-fp8")
                                      for gpu, seed in (("0", 0), ("1", 1), ("0", 2)))
    assert most == {"0": 2, "1": 2}  # a seed's two runs at once, never more on a GPU
    lane0 = [seed for arm, gpu, seed in runs[1:] if gpu == "0"]
    assert lane0.index(2) > max(i for i, seed in enumerate(lane0) if seed == 0)  # a lane's seeds one after another


def test_fp8_learning_tis_runs_its_three_seeds_two_at_a_time_with_token_level_truncated_is(tmp_path, monkeypatch):
    from arc_experiments.gpu import fp8_stages
    from arc_experiments.gpu.multigpu_stages import LEARNING_ARMS

    runs, most = _fake_learning_arms(monkeypatch, fp8_stages)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: [])  # one GPU
    assert fp8_stages.fp8_learning_tis(Context(out=tmp_path / "out", work=tmp_path / "work")) == 0
    assert runs[0] == ("student", "0", -1)
    assert sorted(runs[1:3]) == [("colocate-fp8-tis", "0", 0), ("colocate-fp8-tis", "0", 1)]  # the pair, either order
    assert runs[3] == ("colocate-fp8-tis", "0", 2)
    assert most == {"0": 2}
    flags = LEARNING_ARMS["colocate-fp8-tis"]  # the FP8 arm's flags and the IS mode, nothing else
    assert flags == [*LEARNING_ARMS["colocate-fp8"], "--vllm_importance_sampling_mode", "token_truncate"]


def test_each_multigpu_layout_runs_what_its_name_says_whatever_the_shipped_config_defaults():
    """A layout's row stays comparable across machines: `async1` in its name iff it runs `async_rollouts: 1`, `tp2`
    iff vLLM tensor parallel 2 (the shipped server configs turned asynchronous and tensor parallel after machine 5;
    its 2gpu-server and 4gpu-server rows were synchronous with an engine per GPU)."""
    import yaml

    from arc_experiments.gpu.multigpu_stages import LAYOUTS

    for name, (config, _, flags) in LAYOUTS.items():
        settings = yaml.safe_load((ROOT / config).read_text())
        pairs = dict(zip(flags[::2], flags[1::2]))
        lag = int(pairs.get("--async_rollouts", settings.get("async_rollouts") or 0))
        tensor_parallel = int(pairs.get("--vllm_tensor_parallel_size", settings.get("vllm_tensor_parallel_size") or 1))
        assert lag == (1 if "async1" in name else 0), name
        assert tensor_parallel == (2 if "tp2" in name else 1), name


def test_the_drills_run_synchronously_as_when_they_were_measured():
    """The drills' server config turned asynchronous after they ran; their teacher drill switches to colocated vLLM,
    which `async_rollouts: 1` refuses, so every drill pins the synchronous path."""
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location("multigpu_drills", ROOT / "benchmarks" / "multigpu_drills.py")
    drills = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(drills)
    for name in ("student-server-killed", "port-taken", "teacher-server-killed", "trainer-rank-killed",
                 "master-port-taken"):
        config, _, flags = drills.drill_args(name, "/m", port=8000)
        lag = yaml.safe_load((ROOT / config).read_text()).get("async_rollouts") or 0
        lag = int(dict(zip(flags, flags[1:])).get("--async_rollouts", lag))  # a repeated flag: the last one wins
        assert lag == 0, name


def test_every_phase_names_known_jobs_on_disjoint_gpus_each_layout_on_as_many_as_it_needs():
    """A phase with a typo or overlapping GPUs would fail on a rented machine, after its start-up; an FP8 layout is
    only a figure beside its bf16 twin, so some phase runs that twin on a machine of the same size (T8 after T)."""
    from arc_experiments.gpu.multigpu_stages import LAYOUTS, PHASES, SMALL_MODEL_JOBS

    for label, jobs in PHASES.items():
        taken: list[str] = []
        for job, gpus in jobs.items():
            ids = gpus.split(",")
            assert job in LAYOUTS or job in SMALL_MODEL_JOBS or job.startswith("learning-"), (label, job)
            if job in LAYOUTS:
                assert len(ids) == LAYOUTS[job][1], (label, job)
            assert not set(ids) & set(taken), label
            taken += ids
    machine_size = {label: 1 + max(int(i) for gpus in jobs.values() for i in gpus.split(",")) for label, jobs in
                    PHASES.items()}
    for label, jobs in PHASES.items():
        for job in jobs:
            if job.endswith("-fp8"):
                twins = [other for other, others in PHASES.items() if job.removesuffix("-fp8") in others and
                         machine_size[other] <= machine_size[label]]
                assert twins, (label, job)
    assert PHASES["T8"] == {"2gpu-server-async1-fp8": "0,1"} and machine_size["T8"] == machine_size["T"] == 2


def test_fp8_learning_all_on_four_gpus_runs_nine_runs_in_two_rounds_at_most_two_on_a_gpu(tmp_path, monkeypatch):
    """Both FP8 learning stages in one pool: three bf16 + FP8 seed pairs and a TIS pair at once, one lane a GPU, the
    third TIS seed after lane 0's first pair (two rounds, not the three of the stages one after the other)."""
    from arc_experiments.gpu import fp8_stages

    runs, most = _fake_learning_arms(monkeypatch, fp8_stages)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: ["0", "1", "2", "3"])
    assert fp8_stages.fp8_learning_all(Context(out=tmp_path / "out", work=tmp_path / "work")) == 0
    assert runs[0] == ("student", "0", -1)
    lanes = (("0", 0), ("1", 1), ("2", 2))
    expected = [(arm, gpu, seed) for arm in ("colocate", "colocate-fp8") for gpu, seed in lanes]
    expected += [("colocate-fp8-tis", "3", 0), ("colocate-fp8-tis", "3", 1), ("colocate-fp8-tis", "0", 2)]
    assert sorted(runs[1:]) == sorted(expected)
    assert most == {"0": 2, "1": 2, "2": 2, "3": 2}
    lane0 = [(arm, seed) for arm, gpu, seed in runs[1:] if gpu == "0"]
    assert lane0[-1] == ("colocate-fp8-tis", 2)  # after the lane's first pair


def test_fp8_learning_all_with_a_seed_runs_that_seeds_three_runs_only(tmp_path, monkeypatch):
    """`--seed 2` replaces a lost seed: its bf16 and FP8 runs side by side, then its TIS run, on one GPU (a pair's
    partner runs again beside it: the pairs share a machine's student)."""
    from arc_experiments.gpu import fp8_stages

    runs, most = _fake_learning_arms(monkeypatch, fp8_stages)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: [])
    assert fp8_stages.fp8_learning_all(Context(out=tmp_path / "out", work=tmp_path / "work", seed=2)) == 0
    assert runs[0] == ("student", "0", -1)
    assert sorted(runs[1:3]) == [("colocate", "0", 2), ("colocate-fp8", "0", 2)] and runs[3:] == [
        ("colocate-fp8-tis", "0", 2)]
    assert most == {"0": 2}
    with pytest.raises(ValueError, match="--seed 3: the FP8 learning stages run seeds 0, 1, 2"):
        fp8_stages.fp8_learning(Context(out=tmp_path / "out", work=tmp_path / "work", seed=3))


def test_fp8_learning_with_seeds_runs_each_seeds_pair_one_after_the_other_on_one_gpu(tmp_path, monkeypatch):
    """`--seeds 0,1` on one GPU: seed 0's bf16 and FP8 runs side by side, then seed 1's, nothing else."""
    from arc_experiments.gpu import fp8_stages

    runs, most = _fake_learning_arms(monkeypatch, fp8_stages)
    monkeypatch.setattr("arc_experiments.gpu.runner.gpu_ids", lambda: [])
    assert main(["fp8-learning", "--seeds", "0,1", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")]) == 0
    assert runs[0] == ("student", "0", -1)
    assert [sorted(runs[1:3]), sorted(runs[3:])] == [[("colocate", "0", 0), ("colocate-fp8", "0", 0)],
                                                     [("colocate", "0", 1), ("colocate-fp8", "0", 1)]]
    assert most == {"0": 2}
    with pytest.raises(ValueError, match="--seeds 3,4: the FP8 learning stages run seeds 0, 1, 2"):
        fp8_stages.fp8_learning(Context(out=tmp_path / "out", work=tmp_path / "work", seeds=(0, 3, 4)))
    with pytest.raises(ValueError, match="--seed and --seeds: give one of them"):
        fp8_stages.learning_seeds(Context(out=tmp_path / "out", seed=1, seeds=(0,)))
    assert fp8_stages.learning_seeds(Context(out=tmp_path / "out", seeds=(1, 0, 1))) == (1, 0)  # a repeat runs once
