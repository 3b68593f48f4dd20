"""`arc-trl sweep --dry-run` and `arc-trl condor train --dry-run` run the training preflight on every config they
would launch (`arc-trl train --check_config true`'s checks): a run that would fail its first line is named, with the
reason, and the exit code is 2; `--no-preflight` skips it."""

from __future__ import annotations

from pathlib import Path

import yaml

from arc_trl.cli.sweep import main as sweep_main
from arc_trl.launch.single_jobs import main as condor_main

ROOT = Path(__file__).resolve().parents[3]


def base_config(tmp_path: Path, model: Path) -> Path:
    config = yaml.safe_load((ROOT / "configs" / "tiny-cpu.yaml").read_text())
    config.update(model_name_or_path=str(model), output_dir=str(tmp_path / "out"), max_tasks=4,
                  per_device_train_batch_size=4)
    path = tmp_path / "base.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_sweep_dry_run_names_the_run_that_would_fail_and_exits_2(tiny_model_dir, tmp_path, capsys):
    base = base_config(tmp_path, tiny_model_dir)
    missing = tmp_path / "no-such-model"
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({
        "name": "pre", "base_config": str(base), "grid": {"model_name_or_path": [str(tiny_model_dir), str(missing)]},
        "run_name": "m{model_name_or_path}"}))
    argv = [str(tmp_path / "sweep.yaml"), "--dry-run", "--sweep-dir", str(tmp_path / "runs")]
    assert sweep_main(argv) == 2
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("preflight")]
    assert len(lines) == 3 and lines[-1] == "preflight: 1 of 2 runs passed"
    ok = next(line for line in lines if ": ok, " in line)
    assert "4 training prompts from arc-agi-1/train" in ok and str(tiny_model_dir) in ok
    bad = next(line for line in lines if ": ok, " not in line and "runs passed" not in line)
    assert "model_name_or_path" in bad and str(missing) in bad  # the key and the path, in one line
    assert sweep_main([*argv, "--no-preflight"]) == 0
    assert "preflight" not in capsys.readouterr().out
    assert not (tmp_path / "out").exists()  # a preflight writes nothing where the run would


def test_condor_train_dry_run_checks_the_config_with_the_jobs_overrides(tiny_model_dir, tmp_path, capsys):
    config = base_config(tmp_path, tiny_model_dir)
    argv = ["train", "--config", str(config), "--dry-run", "--job-dir", str(tmp_path / "job")]
    assert condor_main(argv, printer=print) == 0
    assert "preflight: ok, 4 training prompts" in capsys.readouterr().out
    # arc-trl serve's own flags after -- are the job's launcher's, not training keys: still a valid job
    assert condor_main([*argv, "--", "--no-accelerate", "--gpus", "0"], printer=print) == 0
    assert "preflight: ok, 4 training prompts" in capsys.readouterr().out
    # the overrides after -- are what the job runs with: a prompt cap no task fits is caught here
    assert condor_main([*argv, "--", "--max_prompt_tokens", "10"], printer=print) == 2
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("preflight"))
    assert line == ("preflight: error: dataset arc-agi-1/train: all 400 prompts are longer than max_prompt_tokens=10 "
                    f"(shortest: {line.rsplit('shortest: ', 1)[1]}")  # worded as arc-trl train says it, in one line
    assert (tmp_path / "job" / "base.sub").exists()  # the .sub is still written, for a look
