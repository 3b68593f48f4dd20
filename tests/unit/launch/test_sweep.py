"""Sweep files: expansion (grid / variants / random), names, validation errors, and the local launcher with a fake
training command (skip finished runs, resume interrupted ones, keep going after a failure)."""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from arc_trl.launch.launchers import parse_gpu_sets, run_sweep
from arc_trl.launch.naming import format_value, render_name
from arc_trl.launch.run_state import latest_checkpoint, run_state
from arc_trl.launch.sweep import SweepError, expand_sweep, format_table, load_sweep

BASE = {
    "model_name_or_path": "tiny-model",
    "learning_rate": 1.0e-5,
    "num_generations": 4,
    "model_init_kwargs": {"dtype": "float32"},
    "output_dir": "will-be-replaced",
    "env": {"HF_HOME": "/tmp/hf"},
}

# A stand-in for scripts/train.py: records its argv/env, fails when asked to, writes HF-style checkpoints and the
# run_summary.json "finished" marker.
FAKE_TRAIN = textwrap.dedent(
    """
    import json, os, pathlib, sys
    import yaml
    args = sys.argv[1:]
    config = yaml.safe_load(open(args[args.index("--config") + 1]))
    out = pathlib.Path(config["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    call = {"args": args, "run_name": config["run_name"], "group": os.environ.get("WANDB_RUN_GROUP"),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}
    with open(os.environ["FAKE_CALLS"], "a") as calls:
        calls.write(json.dumps(call) + "\\n")
    print("training", config["run_name"])
    if config.get("learning_rate") == 0.5:
        sys.exit(3)
    for step in (1, 2):
        ckpt = out / f"checkpoint-{step}"
        ckpt.mkdir(exist_ok=True)
        (ckpt / "trainer_state.json").write_text("{}")
    (out / "run_summary.json").write_text(json.dumps({"steps": 2}))
    """
)


def write_sweep(tmp_path: Path, body: str, base: dict | None = None) -> Path:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base or BASE))
    path = tmp_path / "sweep.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def expand(tmp_path: Path, body: str, **kwargs):
    spec = load_sweep(write_sweep(tmp_path, body), sweep_dir=tmp_path / "runs")
    return spec, expand_sweep(spec, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Expansion


def test_grid_expands_to_cartesian_product_with_stable_names(tmp_path):
    spec, runs = expand(tmp_path, """
        name: lr
        base_config: base.yaml
        fixed: {max_steps: 3, model_init_kwargs.dtype: bfloat16}
        grid:
          learning_rate: [1e-5, 3.0e-5]
          num_generations: [4, 8]
        """)
    assert [run.name for run in runs] == [
        "learning_rate1e-05_num_generations4", "learning_rate1e-05_num_generations8",
        "learning_rate3e-05_num_generations4", "learning_rate3e-05_num_generations8",
    ]
    assert [run.varied for run in runs] == [
        {"learning_rate": 1e-05, "num_generations": 4}, {"learning_rate": 1e-05, "num_generations": 8},
        {"learning_rate": 3e-05, "num_generations": 4}, {"learning_rate": 3e-05, "num_generations": 8},
    ]
    config = runs[3].config
    assert config["learning_rate"] == 3e-05 and isinstance(config["learning_rate"], float)  # "1e-5" is not a str
    assert config["num_generations"] == 8 and config["max_steps"] == 3
    assert config["model_init_kwargs"] == {"dtype": "bfloat16"}  # dotted key into a nested dict
    assert config["run_name"] == runs[3].name
    assert config["output_dir"] == str(tmp_path / "runs" / runs[3].name)
    assert config["env"] == {"HF_HOME": "/tmp/hf", "WANDB_RUN_GROUP": "lr"}
    assert runs[0].config_path == tmp_path / "runs" / runs[0].name / "config.yaml"
    assert spec.varied_keys == ["learning_rate", "num_generations"]


def test_variants_times_grid_and_custom_template(tmp_path):
    _, runs = expand(tmp_path, """
        base_config: base.yaml
        variants:
          - {name: grpo, teacher_tau: 0.0}
          - {teacher_tau: 0.3, model_init_kwargs.dtype: bfloat16}
        grid: {learning_rate: [1e-6, 2.4e-6]}
        run_name: "{index}-{variant}-lr{learning_rate:.0e}-{model_init_kwargs.dtype}"
        wandb: {project: arc, group: g1}
        """)
    assert [run.name for run in runs] == [
        "000-grpo-lr1e-06-float32", "001-grpo-lr2e-06-float32",  # format spec .0e: 2.4e-06 -> 2e-06
        "002-teacher_tau0.3_dtypebfloat16-lr1e-06-bfloat16", "003-teacher_tau0.3_dtypebfloat16-lr2e-06-bfloat16",
    ]
    assert runs[2].varied == {"teacher_tau": 0.3, "model_init_kwargs.dtype": "bfloat16", "learning_rate": 1e-06}
    assert runs[0].config["env"]["WANDB_PROJECT"] == "arc" and runs[0].config["env"]["WANDB_RUN_GROUP"] == "g1"


def test_default_name_with_variants_uses_variant_name_then_grid_keys(tmp_path):
    _, runs = expand(tmp_path, """
        base_config: base.yaml
        variants: [{name: repl, agent_mode: repl}, {name: program, agent_mode: program}]
        grid: {lora_r: [16, 32]}
        """)
    assert [run.name for run in runs] == ["repl_lora_r16", "repl_lora_r32", "program_lora_r16", "program_lora_r32"]


def test_random_search_is_reproducible_with_exact_values(tmp_path):
    body = """
        base_config: base.yaml
        random:
          n: 3
          seed: 7
          params:
            learning_rate: {log_uniform: [1e-6, 1e-4]}
            teacher_tau: {uniform: [0, 1]}
            lora_r: {choice: [8, 16, 32]}
            max_turns: {int: [2, 6]}
        """
    _, runs = expand(tmp_path, body)
    assert [run.varied for run in runs] == [
        {"learning_rate": 4.443e-06, "teacher_tau": 0.1508, "lora_r": 32, "max_turns": 2},
        {"learning_rate": 1.396e-06, "teacher_tau": 0.5359, "lora_r": 16, "max_turns": 6},
        {"learning_rate": 1.306e-06, "teacher_tau": 0.5074, "lora_r": 8, "max_turns": 2},
    ]
    # Sample 0 by hand: one draw per parameter, in order, from random.Random(seed), rounded to 4 significant digits.
    rng = random.Random(7)
    assert float(f"{math.exp(rng.uniform(math.log(1e-6), math.log(1e-4))):.4g}") == 4.443e-06
    assert float(f"{rng.uniform(0, 1):.4g}") == 0.1508
    assert runs[0].name == "learning_rate4.443e-06_teacher_tau0.1508_lora_r32_max_turns2"
    _, again = expand(tmp_path, body)
    assert [run.name for run in again] == [run.name for run in runs]
    _, other_seed = expand(tmp_path, body.replace("seed: 7", "seed: 8"))
    assert [run.varied for run in other_seed] != [run.varied for run in runs]


def test_value_formatting_is_compact_and_filesystem_safe():
    assert [format_value(v) for v in (1e-05, 0.3, 2e-5, 1.0, 100, True, None)] == [
        "1e-05", "0.3", "2e-05", "1.0", "100", "true", "none"]
    assert render_name("m{model}_x", {"model": "Qwen/Qwen3-8B Instruct"}) == "mQwen-Qwen3-8B-Instruct_x"
    assert render_name("{a}", {"a": [1, 2]}) == "1-2"


# ---------------------------------------------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("base_config: missing.yaml\ngrid: {lora_r: [1]}", "base_config 'missing.yaml' not found"),
        ("base_config: base.yaml\ngrid: {lora_r: []}", "grid.lora_r is an empty list"),
        ("base_config: base.yaml\ngrid: {lora_r: 8}", "grid.lora_r must be a list"),
        ("base_config: base.yaml\nrandom: {n: 2, params: {learning_rate: {log_uniform: [0, 1]}}}",
         "'learning_rate': log_uniform needs 0 < low"),
        ("base_config: base.yaml\nrandom: {n: 2, params: {lora_r: {normal: [0, 1]}}}", "unknown distribution 'normal'"),
        ("base_config: base.yaml\nrandom: {n: 0, params: {lora_r: {choice: [8]}}}", "random.n must be a positive"),
        ("base_config: base.yaml\nrandom: {n: 2, params: {lora_r: {uniform: [5, 1]}}}", "low < high"),
        ("base_config: base.yaml", "nothing to vary"),
        ("base_config: base.yaml\ngird: {lora_r: [8]}", "unknown keys ['gird']"),
        ("base_config: base.yaml\ngrid: {lora_r: [8]}\nvariants: [{lora_r: 4}]",
         "keys ['lora_r'] are varied by both 'variants' and 'grid'"),
        ("base_config: base.yaml\ngrid: {lora_r: [8]}\nrun_name: '{lr}'", "placeholder {lr} is neither a config key"),
        ("base_config: base.yaml\ngrid: {learning_rate.x: [8]}", "'learning_rate' is 1e-05, not a mapping"),
        ("base_config: base.yaml\nvariants: [{name: a}, {name: a}]", "duplicate names ['a']"),
        ("base_config: base.yaml\ngrid: {output_dir: [a, b]}", "['output_dir'] are set per run by the sweep"),
        ("base_config: base.yaml\ngrid: {vllm_gpus: [2]}", "run 'vllm_gpus2': vllm_gpus=2 but no student server"),
    ],
)
def test_validation_errors_name_the_file_and_key(tmp_path, body, fragment):
    with pytest.raises(SweepError) as error:
        expand(tmp_path, body)
    assert str(error.value).startswith(str(tmp_path / "sweep.yaml"))
    assert fragment in str(error.value)


def test_name_collision_is_an_error(tmp_path):
    with pytest.raises(SweepError, match="run name collision: 'lr1e-05' is produced by runs 0 .* and 1"):
        expand(tmp_path, """
            base_config: base.yaml
            grid: {learning_rate: [1e-5], num_generations: [4, 8]}
            run_name: "lr{learning_rate}"
            """)


def test_unknown_config_keys_are_reported_when_known_keys_are_given(tmp_path):
    known = set(BASE) | {"run_name", "learning_rate", "lora_r"}
    with pytest.raises(SweepError, match=r"unknown config keys \['lora_rank'\]"):
        expand(tmp_path, "base_config: base.yaml\ngrid: {lora_rank: [8]}", known_keys=known)
    _, runs = expand(tmp_path, "base_config: base.yaml\ngrid: {lora_r: [8]}", known_keys=known)
    assert len(runs) == 1


def test_base_config_is_found_relative_to_the_sweep_file(tmp_path, monkeypatch):
    nested = tmp_path / "configs" / "sweeps"
    nested.mkdir(parents=True)
    (nested / "base.yaml").write_text(yaml.safe_dump(BASE))
    (nested / "s.yaml").write_text("base_config: base.yaml\ngrid: {lora_r: [8]}\n")
    monkeypatch.chdir(tmp_path)  # the default sweep_dir is relative to the current directory
    spec = load_sweep(nested / "s.yaml")
    assert spec.base_config_path == nested / "base.yaml"
    assert spec.sweep_dir == tmp_path / "runs" / "sweeps" / "s"


# ---------------------------------------------------------------------------------------------------------------
# Run state


def make_checkpoint(output_dir: Path, step: int, complete: bool = True) -> Path:
    path = output_dir / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / "trainer_state.json").write_text("{}")
    return path


def test_run_state_finds_latest_complete_checkpoint(tmp_path):
    assert run_state(tmp_path / "missing").status == "new"
    for step in (2, 10):
        make_checkpoint(tmp_path, step)
    make_checkpoint(tmp_path, 12, complete=False)  # cut off while saving
    (tmp_path / "checkpoint-x").mkdir()
    state = run_state(tmp_path)
    assert state.status == "resumable" and state.checkpoint == tmp_path / "checkpoint-10"
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-10"
    (tmp_path / "run_summary.json").write_text("{}")
    assert run_state(tmp_path).status == "finished"


# ---------------------------------------------------------------------------------------------------------------
# Writing and the local launcher


TWO_RUNS = """
    name: two
    base_config: base.yaml
    grid: {learning_rate: [1e-5, 2e-5]}
    """


def fake_prefix(tmp_path: Path, monkeypatch) -> list[str]:
    script = tmp_path / "fake_train.py"
    script.write_text(FAKE_TRAIN)
    monkeypatch.setenv("FAKE_CALLS", str(tmp_path / "calls.jsonl"))
    return [sys.executable, str(script)]


def read_calls(tmp_path: Path) -> list[dict]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_dry_run_writes_configs_and_manifest_but_launches_nothing(tmp_path, monkeypatch):
    prefix = fake_prefix(tmp_path, monkeypatch)
    lines: list[str] = []
    codes = run_sweep(write_sweep(tmp_path, TWO_RUNS), command_prefix=prefix, dry_run=True,
                      sweep_dir=tmp_path / "runs", printer=lines.append)
    assert codes == {"learning_rate1e-05": None, "learning_rate2e-05": None}
    assert read_calls(tmp_path) == []
    config = yaml.safe_load((tmp_path / "runs" / "learning_rate2e-05" / "config.yaml").read_text())
    assert config["learning_rate"] == 2e-05 and config["run_name"] == "learning_rate2e-05"
    manifest = json.loads((tmp_path / "runs" / "sweep_manifest.json").read_text())
    assert [(run["name"], run["varied"], run["status"]) for run in manifest["runs"]] == [
        ("learning_rate1e-05", {"learning_rate": 1e-05}, "new"),
        ("learning_rate2e-05", {"learning_rate": 2e-05}, "new"),
    ]
    table = "\n".join(lines)
    assert "learning_rate1e-05  1e-05          new" in table


def test_local_sweep_runs_to_the_end_and_rerun_skips_finished(tmp_path, monkeypatch):
    prefix = fake_prefix(tmp_path, monkeypatch)
    sweep = write_sweep(tmp_path, TWO_RUNS)
    codes = run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lambda _: None)
    assert codes == {"learning_rate1e-05": 0, "learning_rate2e-05": 0}
    calls = read_calls(tmp_path)
    assert [call["run_name"] for call in calls] == ["learning_rate1e-05", "learning_rate2e-05"]
    assert all(call["group"] == "two" for call in calls)
    assert "--resume_from_checkpoint" not in calls[0]["args"]
    for name in codes:
        assert (tmp_path / "runs" / name / "run_summary.json").is_file()
        assert f"training {name}" in (tmp_path / "runs" / name / "train.log").read_text()
    manifest = json.loads((tmp_path / "runs" / "sweep_manifest.json").read_text())
    assert [(run["status"], run["exit_code"]) for run in manifest["runs"]] == [("finished", 0), ("finished", 0)]

    lines: list[str] = []
    again = run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lines.append)
    assert again == {"learning_rate1e-05": None, "learning_rate2e-05": None}
    assert len(read_calls(tmp_path)) == 2  # nothing ran again
    assert "skipped (finished)" in "\n".join(lines)


def test_interrupted_run_resumes_from_latest_checkpoint(tmp_path, monkeypatch):
    prefix = fake_prefix(tmp_path, monkeypatch)
    sweep = write_sweep(tmp_path, TWO_RUNS)
    interrupted = tmp_path / "runs" / "learning_rate2e-05"
    for step in (5, 40, 300):
        make_checkpoint(interrupted, step)
    make_checkpoint(interrupted, 320, complete=False)
    lines: list[str] = []
    run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", dry_run=True, printer=lines.append)
    assert "learning_rate2e-05  2e-05          resumable (checkpoint-300)" in "\n".join(lines)

    codes = run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lambda _: None)
    assert codes == {"learning_rate1e-05": 0, "learning_rate2e-05": 0}
    calls = {call["run_name"]: call["args"] for call in read_calls(tmp_path)}
    assert calls["learning_rate1e-05"] == ["--config", str(tmp_path / "runs" / "learning_rate1e-05" / "config.yaml")]
    assert calls["learning_rate2e-05"] == ["--config", str(interrupted / "config.yaml"),
                                           "--resume_from_checkpoint", str(interrupted / "checkpoint-300")]


def test_failing_run_does_not_stop_the_others(tmp_path, monkeypatch):
    prefix = fake_prefix(tmp_path, monkeypatch)
    sweep = write_sweep(tmp_path, "base_config: base.yaml\ngrid: {learning_rate: [0.5, 1e-5]}\n")
    lines: list[str] = []
    codes = run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lines.append)
    assert codes == {"learning_rate0.5": 3, "learning_rate1e-05": 0}
    assert "summary (1 ok or skipped, 1 failed)" in "\n".join(lines)
    assert "learning_rate0.5    FAILED (exit 3)" in "\n".join(lines)
    assert run_state(tmp_path / "runs" / "learning_rate0.5").status == "new"


def test_a_command_that_cannot_start_fails_its_runs_only(tmp_path):
    sweep = write_sweep(tmp_path, TWO_RUNS)
    codes = run_sweep(sweep, command_prefix=[str(tmp_path / "no-such-program")], sweep_dir=tmp_path / "runs",
                      printer=lambda _: None)
    assert codes == {"learning_rate1e-05": 127, "learning_rate2e-05": 127}
    assert "cannot start" in (tmp_path / "runs" / "learning_rate1e-05" / "train.log").read_text()


def test_parallel_runs_get_their_own_gpu_set(tmp_path, monkeypatch):
    prefix = fake_prefix(tmp_path, monkeypatch)
    sweep = write_sweep(tmp_path, "base_config: base.yaml\ngrid: {learning_rate: [1e-5, 2e-5, 3e-5]}\n")
    codes = run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", gpus="0,1;2,3",
                      printer=lambda _: None)
    assert set(codes.values()) == {0}
    assert {call["cuda"] for call in read_calls(tmp_path)} == {"0,1", "2,3"}
    assert len(read_calls(tmp_path)) == 3


def test_gpu_set_parsing_and_launcher_errors(tmp_path, monkeypatch):
    assert parse_gpu_sets("0,1;2,3") == ["0,1", "2,3"]
    assert parse_gpu_sets(None) is None
    with pytest.raises(ValueError, match="expected GPU sets"):
        parse_gpu_sets("0,,1")
    prefix = fake_prefix(tmp_path, monkeypatch)
    sweep = write_sweep(tmp_path, TWO_RUNS)
    with pytest.raises(SweepError, match="--max-parallel 3 needs as many GPU sets, --gpus gives 2"):
        run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", gpus="0;1", max_parallel=3,
                  printer=lambda _: None)
    big = write_sweep(tmp_path, "base_config: base.yaml\ngrid: {trainer_gpus: [1, 3]}\n")
    with pytest.raises(SweepError, match=r"run trainer_gpus3 needs 3 GPUs but GPU set\(s\) \['0,1', '2'\]"):
        run_sweep(big, command_prefix=prefix, sweep_dir=tmp_path / "runs", gpus="0,1;2", printer=lambda _: None)
    assert read_calls(tmp_path) == []


def test_finished_run_keeps_its_config_when_the_sweep_changes(tmp_path, monkeypatch):
    prefix = fake_prefix(tmp_path, monkeypatch)
    sweep = write_sweep(tmp_path, "base_config: base.yaml\ngrid: {learning_rate: [1e-5]}\nfixed: {max_steps: 1}\n")
    run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lambda _: None)
    sweep.write_text("base_config: base.yaml\ngrid: {learning_rate: [1e-5]}\nfixed: {max_steps: 9}\n")
    lines: list[str] = []
    run_sweep(sweep, command_prefix=prefix, sweep_dir=tmp_path / "runs", printer=lines.append)
    assert "finished with a different config; kept its config.yaml" in "\n".join(lines)
    config = yaml.safe_load((tmp_path / "runs" / "learning_rate1e-05" / "config.yaml").read_text())
    assert config["max_steps"] == 1


def test_table_lists_varied_values_and_status(tmp_path):
    spec, runs = expand(tmp_path, "base_config: base.yaml\ngrid: {learning_rate: [1e-5], use_peft: [true]}\n")
    assert format_table(spec, runs).splitlines() == [
        "run                              learning_rate  use_peft  status",
        "-------------------------------  -------------  --------  ------",
        "learning_rate1e-05_use_pefttrue  1e-05          true      new",
    ]


EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "configs" / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_sweep_files_expand(path, tmp_path):
    data = yaml.safe_load(path.read_text())
    base = Path(__file__).resolve().parents[3] / data["base_config"]
    if not base.is_file():
        pytest.skip(f"base config {data['base_config']} not written yet")
    spec = load_sweep(path, sweep_dir=tmp_path)
    runs = expand_sweep(spec)
    assert runs and len({run.name for run in runs}) == len(runs)


def test_sigterm_stops_the_sweep_and_its_running_training(tmp_path):
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import os, pathlib, sys, time\n"
                       f"pathlib.Path({str(tmp_path / 'pid')!r}).write_text(str(os.getpid()))\n"
                       "time.sleep(60)\n")
    sweep = write_sweep(tmp_path, TWO_RUNS)
    process = subprocess.Popen(
        [sys.executable, "-m", "arc_trl", "sweep", str(sweep), "--no-check-keys", "--sweep-dir", str(tmp_path / "runs"),
         "--command", f"{sys.executable} {sleeper}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=Path(__file__).resolve().parents[3],
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "pid").exists(), process.communicate(timeout=5)[0]
    time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=30)[0]
    assert process.returncode == 128 + signal.SIGTERM, output
    assert "interrupted: stopping running trainings" in output
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert "learning_rate2e-05" not in output.split("[stop]")[1]  # the second run was never started
