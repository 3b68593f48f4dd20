"""The headline summaries are what their committed inputs give (arc_experiments/figures): each recomputed here and
compared byte for byte with the committed file; the figures the SmolLM2 files cannot give say so; the 0.6B claim."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from arc_experiments.figures.catalog import ROOT, SUMMARIES, main, render
from arc_experiments.figures.smollm2 import exact_pass1
from arc_experiments.learning.student_t import t_quantile
from arc_experiments.machine_logs import logs_of


@pytest.mark.parametrize("name", sorted(SUMMARIES))
def test_the_committed_summary_is_what_its_committed_inputs_give(name):
    assert render(name) == (ROOT / SUMMARIES[name].path).read_text(), (
        f"{SUMMARIES[name].path} is not what {SUMMARIES[name].inputs} give: run python -m arc_experiments.figures")


def test_the_06b_summary_no_longer_claims_that_opd_beats_grpo_alone():
    """+2.1 points over GRPO alone, but GRPO alone ran one seed: the interval's seed part is borrowed from the two OPD
    runs (1 df) and the check is not measured (before: "excludes zero: yes" from a task-only interval)."""
    s = json.loads((ROOT / "results" / "gpu_learning_summary.json").read_text())
    versus = s["intervals"]["grpo_opd_minus_grpo_only"]
    assert s["grpo_opd_minus_grpo_only"] == pytest.approx(0.0205078125)  # 21 / 1024
    assert versus["n_runs"] == [2, 1] and set(versus["seed_part"].values()) == {"pooled (1 df)"}
    assert versus["ci"][0] < versus["task_only_ci"][0] and versus["ci"][1] > versus["task_only_ci"][1]
    assert s["checks"]["grpo_opd_minus_grpo_only_ci_excludes_zero"] is None and s["checks"]["seeds_ge_2"] is False


def test_smollm2_figures_without_committed_inputs_say_which_file_is_missing():
    s = json.loads((ROOT / "results" / "gpu_learning_smollm2_summary.json").read_text())
    for key in ("grpo_opd_minus_student", "grpo_opd_minus_grpo_only", "grpo_only_minus_student"):
        assert s[f"{key}_ci95"].startswith("not recomputable:") and "eval_arc/step_" in s[f"{key}_ci95"]
    assert all(v["ci95"].startswith("not recomputable:") for v in s["grpo_opd_minus_grpo_only_equal_steps"].values())
    # the seed-only interval, by hand: GRPO + OPD's seeds end (step 40) at 346, 362, 338 of 1024 attempts from 306:
    # gains 40, 56, 32 (mean 128 / 3, sample variance 448 / 3), so mean +- t(2) * sqrt(448 / 9) / 1024
    half = t_quantile(0.975, 2) * math.sqrt(448 / 9) / 1024
    assert s["grpo_opd_minus_student"] == pytest.approx(128 / 3 / 1024)
    assert s["grpo_opd_minus_student_seed_only_ci95"] == pytest.approx([128 / 3 / 1024 - half, 128 / 3 / 1024 + half])
    assert s["heldout_never_trained_on"] is True and s["heldout_check"]["heldout_tasks"] == 256
    arc = s["arc_agi_1"]
    assert (arc["dataset_tasks"], arc["attempted_tasks"], arc["student_pass1"]) == (400, 396, 0.5 / 400)


def test_per_seed_pass1_rounded_to_4_digits_is_recovered_exactly():
    assert exact_pass1(0.2988, 1024) == 306 / 1024 and exact_pass1(0.3857, 1024) == 395 / 1024
    with pytest.raises(ValueError, match="not k / 1024"):
        exact_pass1(0.29885, 1024)


def test_check_names_the_keys_of_a_stale_summary_and_a_write_makes_it_current(tmp_path, capsys):
    for path in ("benchmarks/step_summary.py", "results/gpu_step_summary.json", "results/gpu_step_speed/"
                 "summary_inputs.json", *(f"results/gpu_profiles/{p.name}" for p in
                                          (ROOT / "results" / "gpu_profiles").glob("speed_*.json"))):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    for folder in ("gpu_fp8", "gpu_multigpu"):  # the FP8 entries' inputs (fp8_layouts: the F8 layouts' records)
        shutil.copytree(ROOT / "results" / folder, tmp_path / "results" / folder)
        shutil.copytree(ROOT / "lab" / "logs" / folder, tmp_path / "lab" / "logs" / folder)  # their machine logs
    assert main(["step", "--check", "--root", str(tmp_path)]) == 0
    inputs = tmp_path / "results" / "gpu_step_speed" / "summary_inputs.json"
    inputs.write_text(json.dumps({**json.loads(inputs.read_text()), "date": "2026-12-31"}))
    capsys.readouterr()
    assert main(["step", "--check", "--root", str(tmp_path)]) == 1
    assert "results/gpu_step_summary.json: differs from what" in capsys.readouterr().out
    assert main(["step", "--root", str(tmp_path)]) == 0 and main(["step", "--check", "--root", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "results" / "gpu_step_summary.json").read_text())["qwen3_8b_recipe"]["date"] == \
        "2026-12-31"
    with pytest.raises(SystemExit):
        main(["bogus"])
    assert "no summary ['bogus']" in capsys.readouterr().err


def test_every_input_a_summary_names_is_committed():
    import subprocess

    tracked = set(subprocess.run(["git", "ls-files", "results", "lab/logs", "configs/gpu/smollm2"], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.split())
    steps = json.loads((ROOT / "results" / "gpu_step_speed" / "summary_inputs.json").read_text())
    needed = {p for pair in steps["shapes"].values() for p in pair} | {"results/gpu_step_speed/summary_inputs.json"}
    needed |= {str(p.relative_to(ROOT)) for p in (ROOT / "results" / "gpu_learning").glob("results-machine*.json")}
    folder = Path("results/gpu_learning_smollm2")
    needed |= {str(folder / n) for n in ("teachers_results.json", "sweep_choice.json", "sweep_temperature_choice.json",
                                         "arms_summary.json", "heldout_check.json", "summary_text.json")}
    needed |= {"lab/logs/gpu_learning_smollm2/machine1_queue.log"}  # its machine log (the GPU and the versions)
    needed |= {str(folder / "arc_agi_1" / f"eval-{m}" / f) for m in ("student", "grpo-only")
               for f in ("metrics.json", "per_attempt.jsonl")}
    assert needed <= tracked, sorted(needed - tracked)


def test_multigpu_rows_leave_out_the_first_step_and_divide_by_the_same_machines_one_gpu_step():
    from arc_experiments.figures.multigpu import layout_row

    def record(name, gpus, steps):
        per_step = [{"step": i + 1, "time/step": t, "time/generate": t / 2} for i, t in enumerate(steps)]
        return {"layout": name, "gpus": gpus, "config": "c.yaml", "exit_code": 0, "peak_mib_per_gpu": {"0": 2048},
                "run_summary": {"per_step": per_step}}

    one = layout_row(record("1gpu", 1, [90.0, 60.0, 62.0]), None)
    assert one["step_s"] == 61.0 and one["first_step_s"] == 90.0  # the warm-up step is reported apart
    two = layout_row(record("2gpu", 2, [50.0, 40.0, 42.0]), one["step_s"])
    assert two["step_s"] == 41.0 and two["speedup"] == round(61.0 / 41.0, 3) and two["generate_s"] == 20.5
    assert two["peak_gib_per_gpu"] == {"0": 2.0}


def test_a_partial_layout_reads_its_first_step_from_the_trainer_log(tmp_path):
    from arc_experiments.figures.multigpu import partial_row

    log = tmp_path / "results" / "gpu_multigpu" / "logs" / "t.log"
    log.parent.mkdir(parents=True)
    log.write_text("loading\n{'loss': '0', 'time/generate': '29.01', 'time/step': '58.97', 'time/train': '25.1'}\n")
    row = partial_row("4gpu-seeds", 4, log, 62.0, 61.4, "lost")
    assert row["first_step_s"] == 58.97 and row["generate_s"] == 29.01 and row["step_s"] is None
    assert row["steps_measured"] == 0 and row["speedup"] is None
    assert row["first_step_speedup"] == round(61.4 / 58.97, 3) and row["log"] == "results/gpu_multigpu/logs/t.log"


def test_a_partial_layout_measures_the_steps_its_log_printed_after_the_first(tmp_path):
    """Machine 7's synchronous 2-GPU server run was cut off in step 3: steps 2+ from its log are measured as a
    record's (mean, against the same machine's one-GPU step), the first kept apart as warm-up."""
    from arc_experiments.figures.multigpu import partial_row

    log = tmp_path / "results" / "gpu_multigpu" / "logs" / "t.log"
    log.parent.mkdir(parents=True)
    log.write_text("{'time/generate': '32.0', 'time/step': '62.5', 'time/train': '23.0'}\nnoise\n"
                   "{'loss': '0.1', 'time/generate': '33.5', 'time/step': '64.0', 'time/train': '24.5'}\n"
                   "{'time/generate': '34.5', 'time/step': '66.0', 'time/train': '25.5'}\n")
    row = partial_row("2gpu-server", 2, log, 65.0, 63.0, "lost")
    assert (row["steps_measured"], row["step_s"], row["first_step_s"]) == (2, 65.0, 62.5)
    assert row["speedup"] == 1.0 and row["generate_s"] == 34.0 and row["train_s"] == 25.0


def test_a_lost_layout_of_a_machines_phases_gets_a_row_from_its_log_unless_only_warm_up_and_measured_elsewhere(
        tmp_path):
    import json as _json

    from arc_experiments.figures.multigpu import machine_rows

    machine = tmp_path / "results" / "gpu_multigpu" / "7_m"
    machine.mkdir(parents=True)
    logs_of(machine).mkdir(parents=True)
    (machine / "machine.json").write_text(_json.dumps({"phases": {"S": {"1gpu-colocate": "0"},
                                                                  "U": {"2gpu-server": "0,1"},
                                                                  "D": {"4gpu-seeds": "0,1,2,3"}}}))
    per_step = [{"step": i + 1, "time/step": t} for i, t in enumerate([70.0, 66.0, 64.0])]
    (machine / "layout_1gpu-colocate.json").write_text(_json.dumps(
        {"layout": "1gpu-colocate", "gpus": 1, "config": "c", "exit_code": 0, "run_summary": {"per_step": per_step}}))
    (logs_of(machine) / "layout-2gpu-server-trainer.log").write_text("{'time/step': '62'}\n{'time/step': '60'}\n")
    (logs_of(machine) / "layout-4gpu-seeds-trainer.log").write_text("{'time/step': '59'}\n")
    (logs_of(machine) / "layout-4gpu-server-trainer.log").write_text("loading\n")  # lost before its first step
    (machine / "machine.json").write_text(_json.dumps({"phases": {"S": {"1gpu-colocate": "0"},
                                                                  "U": {"2gpu-server": "0,1"},
                                                                  "D": {"4gpu-seeds": "0,1,2,3"},
                                                                  "M": {"4gpu-server": "0,1,2,3"}}}))
    rows = {row["layout"]: row for row in machine_rows(machine)}
    assert "4gpu-server" not in rows  # no logged step: no row
    assert rows["2gpu-server"]["speedup"] == round(65.0 / 60.0, 3) and rows["2gpu-server"]["gpus"] == 2
    assert rows["4gpu-seeds"]["first_step_speedup"] == round(70.0 / 59.0, 3)
    assert "4gpu-seeds" not in {row["layout"] for row in machine_rows(machine, frozenset({"4gpu-seeds"}))}
    assert "2gpu-server" in {row["layout"] for row in machine_rows(machine, frozenset({"2gpu-server"}))}
    # a machine without a one-GPU step (phase F8 alone): its lost layout's row has no speed-up, and no error
    (machine / "layout_1gpu-colocate.json").rename(machine / "layout_2gpu-server-async1.json")
    record = _json.loads((machine / "layout_2gpu-server-async1.json").read_text())
    (machine / "layout_2gpu-server-async1.json").write_text(_json.dumps({**record, "layout": "2gpu-server-async1"}))
    rows = {row["layout"]: row for row in machine_rows(machine)}
    assert rows["2gpu-server"]["step_s"] == 60.0 and rows["2gpu-server"]["speedup"] is None
    assert rows["4gpu-seeds"]["first_step_speedup"] is None


def test_server_learning_scores_each_run_at_each_evaluated_step():
    import json as _json

    from arc_experiments.figures.multigpu import server_learning
    from arc_trl import load_tasks

    spec = "synthetic:n=2,seed=1,difficulty=tiny,families=rotate"
    solved, missed = load_tasks(spec)

    def attempts(right: int) -> str:  # 2 attempts per task; the first task right `right` times, the second never
        rows = [{"task_id": solved.id, "outcome": {"test_predictions": solved.test_outputs if i < right else None}}
                for i in range(2)]
        rows += [{"task_id": missed.id, "outcome": {"test_predictions": None}} for _ in range(2)]
        return "\n".join(_json.dumps(r) for r in rows)

    arms = {"m1/colocate": ("m1", {"arm": "colocate", "seed": 0, "eval_dataset": spec, "gpus": "3", "exit_code": 0,
                                   "run_summary": {"reward_first_steps": 1.0, "reward_last_steps": 2.0,
                                                   "seconds": 95.5},
                                   "evaluations": {"0": attempts(0), "20": attempts(2)}}),
            "m1/server": ("m1", {"eval_dataset": spec, "run_summary": None, "evaluations": {"20": attempts(1)}}),
            "m2/server": ("m2", {"eval_dataset": spec, "run_summary": None, "evaluations": {"20": attempts(0)}})}
    result = server_learning(arms)
    assert result["runs"]["m1/colocate"] == {
        "machine": "m1", "arm": "colocate", "seed": 0, "gpus": "3", "exit_code": 0, "reward_first_steps": 1.0,
        "reward_last_steps": 2.0, "heldout_pass1": {"0": 0.0, "20": 0.5}, "train_s": 95.5, "step_time_s": None,
        "off_policy": None}
    assert result["runs"]["m1/server"]["heldout_pass1"] == {"20": 0.25}  # (1/2 + 0) / 2 tasks
    assert result["runs"]["m2/server"]["heldout_pass1"] == {"20": 0.0}  # another machine's run kept beside it


def test_server_learning_refuses_arms_scored_on_different_tasks():
    from arc_experiments.figures.multigpu import server_learning

    with pytest.raises(ValueError, match="different datasets"):
        server_learning({"a": ("m", {"eval_dataset": "x", "evaluations": {}}),
                         "b": ("m", {"eval_dataset": "y", "evaluations": {}})})


def test_each_layout_is_compared_with_its_own_machines_one_gpu_step(tmp_path):
    from arc_experiments.figures.multigpu import summary

    def write(machine: str, name: str, steps: list[float]) -> None:
        folder = tmp_path / "results" / "gpu_multigpu" / machine
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "machine.json").write_text("{}")
        per_step = [{"step": i + 1, "time/step": t} for i, t in enumerate(steps)]
        (folder / f"layout_{name}.json").write_text(json.dumps(
            {"layout": name, "gpus": 1, "config": "c", "exit_code": 0, "run_summary": {"per_step": per_step}}))

    write("1_a", "1gpu-colocate", [99.0, 60.0, 60.0])
    write("1_a", "2gpu-colocate", [99.0, 40.0, 40.0])
    write("2_b", "1gpu-colocate", [99.0, 66.0, 66.0])
    write("2_b", "3gpu-server-ddp", [99.0, 44.0, 44.0])
    (tmp_path / "results" / "gpu_multigpu" / "3_c").mkdir()
    (tmp_path / "results" / "gpu_multigpu" / "3_c" / "machine.json").write_text("{}")  # drills only: no rows
    rows = {(r["machine"], r["layout"]): r for r in summary(tmp_path)["layouts"]}
    assert rows[("1_a", "2gpu-colocate")]["speedup"] == 1.5 and rows[("2_b", "3gpu-server-ddp")]["speedup"] == 1.5
    assert len(rows) == 4
    (tmp_path / "results" / "gpu_multigpu" / "2_b" / "layout_1gpu-colocate.json").unlink()
    rows = {(r["machine"], r["layout"]): r for r in summary(tmp_path)["layouts"]}  # a machine without a one-GPU step
    assert rows[("2_b", "3gpu-server-ddp")]["step_s"] == 44.0
    assert rows[("2_b", "3gpu-server-ddp")]["speedup"] is None  # (e.g. phase F8 alone): no speed-up, not another's


def test_busy_fractions_cover_the_measured_steps_only():
    from arc_experiments.figures.multigpu import measured_busy

    trace = [[t, 0, 100 if t < 10 else 50] for t in range(0, 30)] + [[t, 1, 0] for t in range(0, 30)]
    record = {"gpu_util_trace": trace, "run_summary": {"step_end_unix": [10.0, 20.0, 29.0]}}
    assert measured_busy(record) == {"0": 0.5, "1": 0.0}  # t = 10..29: the warm-up step's 100% left out
    assert measured_busy({"gpu_util_trace": trace, "run_summary": {"step_end_unix": [10.0]}}) is None
    assert measured_busy({"run_summary": {"step_end_unix": [1.0, 2.0]}}) is None


def test_busy_fractions_by_step_show_an_idle_last_step_the_mean_hides():
    from arc_experiments.figures.multigpu import busy_by_step

    # GPU 0 (the engine) busy through step 2 (t 10..20) and idle in step 3 (t 20..30): an async run's last step
    trace = [[t, 0, 100 if t <= 20 else 0] for t in range(10, 31)] + [[t, 1, 100] for t in range(10, 31)]
    by_step = busy_by_step({"gpu_util_trace": trace, "run_summary": {"step_end_unix": [10.0, 20.0, 30.0]}})
    assert by_step == {"0": [1.0, 0.091], "1": [1.0, 1.0]}  # t = 20 ends step 2 and starts step 3: 1 of 11 busy


def test_async_learning_pairs_the_seeds_and_gives_a_seed_aware_interval():
    import json as _json

    from arc_experiments.figures.multigpu import async_learning
    from arc_trl import load_tasks

    spec = "synthetic:n=2,seed=1,difficulty=tiny,families=rotate"
    solved, other = load_tasks(spec)

    def attempts(right_first: int, right_second: int) -> str:  # 2 attempts per task
        rows = [{"task_id": solved.id, "outcome": {"test_predictions": solved.test_outputs if i < right_first
                                                   else None}} for i in range(2)]
        rows += [{"task_id": other.id, "outcome": {"test_predictions": other.test_outputs if i < right_second
                                                   else None}} for i in range(2)]
        return "\n".join(_json.dumps(r) for r in rows)

    def run(arm, seed, first, second, seconds, machine="m"):  # wall_s (with the SFT student) is not the figure
        return (machine, {"arm": arm, "seed": seed, "eval_dataset": spec, "wall_s": seconds + 150,
                          "run_summary": {"seconds": seconds, "step_time_s": {"step": seconds / 20}},
                          "evaluations": {"0": attempts(0, 0), "20": attempts(first, second)}})

    arms = {"m/server": run("server", 0, 2, 0, 300.0), "m/server-s1": run("server", 1, 1, 0, 310.0),
            "m/server-async1": run("server-async1", 0, 2, 1, 200.0),
            "m/server-async1-s1": run("server-async1", 1, 2, 0, 210.0),
            "m/server-async1-s2": run("server-async1", 2, 2, 2, 205.0),  # seed 2 has no synchronous pair
            "n/server-s2": run("server", 2, 0, 0, 300.0, machine="n")}  # nor on its own machine
    result = async_learning(arms)
    assert result["seeds"] == [0, 1] and result["machines"] == ["m", "m"] and result["step"] == 20
    assert result["sync_pass1"] == 0.375 and result["async_pass1"] == 0.625  # (0.5 + 0.25) / 2, (0.75 + 0.5) / 2
    assert result["diff"] == 0.25 and result["diff_ci95"][0] < 0.25 < result["diff_ci95"][1]
    assert result["sync_wall_s"] == [300.0, 310.0] and result["async_wall_s"] == [200.0, 210.0]
    assert result["sync_step_s"] == [15.0, 15.5] and result["async_step_s"] == [10.0, 10.5]
    # only steps 0 and 20 evaluated: async (0.625) reaches sync's final 0.375 at step 20, in 20 x 10.25 s; sync too
    assert result["pass1_by_step"] == {"sync": {"0": 0.0, "20": 0.375}, "async": {"0": 0.0, "20": 0.625}}
    assert result["pairs"] == 2 and result["pairs_left_out"] == 0
    assert result["steps_to_sync_final"] == {"sync": 20, "async": 20}
    assert result["train_s_to_sync_final"] == {"sync": 305.0, "async": 205.0}


def test_time_to_sync_final_takes_the_first_evaluated_step_that_reaches_it():
    from arc_experiments.figures.multigpu import time_to_final

    spec = "synthetic:n=2,seed=1,difficulty=tiny,families=rotate"
    import json as _json

    from arc_trl import load_tasks

    tasks = load_tasks(spec)

    def attempts(right: int) -> str:  # the first `right` of the 2 tasks solved, 1 attempt each
        return "\n".join(_json.dumps({"task_id": t.id, "outcome": {"test_predictions": t.test_outputs if i < right
                                                                     else None}}) for i, t in enumerate(tasks))

    def record(scores: dict[str, int]) -> dict:
        return {"eval_dataset": spec, "evaluations": {step: attempts(right) for step, right in scores.items()}}

    runs = {"server": [record({"0": 0, "10": 0, "20": 1})],  # sync: 0.5 only at its last step
            "server-async1": [record({"0": 0, "10": 1, "20": 2})]}  # async: 0.5 at step 10 already
    arms = (("server", "sync"), ("server-async1", "async"))
    result = time_to_final(runs, {"server": [3.0], "server-async1": [2.0]}, *arms)
    assert result["sync_final_pass1"] == 0.5 and result["pairs"] == 1 and result["pairs_left_out"] == 0
    assert result["steps_to_sync_final"] == {"sync": 20, "async": 10}
    assert result["train_s_to_sync_final"] == {"sync": 60.0, "async": 20.0}
    never = {"server": runs["server"], "server-async1": [record({"0": 0, "10": 0, "20": 0})]}
    assert time_to_final(never, {"server": [3.0], "server-async1": [2.0]}, *arms)["steps_to_sync_final"]["async"] is None
    # a pair scored at steps 0 and 20 only (another machine's) is left out: every step averages the same runs; its
    # step time (None here) does not enter the mean either
    mixed = {"server": [*runs["server"], record({"0": 2, "20": 2})],
             "server-async1": [*runs["server-async1"], record({"0": 2, "20": 0})]}
    result = time_to_final(mixed, {"server": [3.0, None], "server-async1": [2.0, 9.0]}, *arms)
    assert result["pairs"] == 1 and result["pairs_left_out"] == 1
    assert result["pass1_by_step"]["async"] == {"0": 0.0, "10": 0.5, "20": 1.0}
    assert result["train_s_to_sync_final"] == {"sync": 60.0, "async": 20.0}
    # a control that ends where it started has no final score to reach: not "reached at step 0 in 0 s"
    flat = {"server": [record({"0": 1, "10": 0, "20": 1})], "server-async1": [record({"0": 1, "10": 2, "20": 2})]}
    result = time_to_final(flat, {"server": [3.0], "server-async1": [2.0]}, *arms)
    assert not result["sync_improved"] and result["steps_to_sync_final"] == {"sync": None, "async": None}


def test_off_policy_figures_come_from_each_logged_step_of_the_trainer_log(tmp_path):
    from arc_experiments.figures.multigpu import off_policy

    log = tmp_path / "trainer.log"
    log.write_text(
        "{'loss': '0.1', 'sampling/importance_sampling_ratio/min': '0.8', 'sampling/masked_episode_frac': '0',"
        " 'async/policy_lag': '0', 'time/step': '5'}\n"
        "noise 'sampling/masked_episode_frac': '0.9' without a step\n"
        "{'sampling/importance_sampling_ratio/min': '0.6', 'sampling/masked_episode_frac': '0.0312',"
        " 'async/policy_lag': '1', 'time/step': '4'}\n")
    assert off_policy(log) == {
        "sampling/importance_sampling_ratio/min": {"mean": 0.7, "extreme": 0.6},
        "sampling/masked_episode_frac": {"mean": 0.0156, "extreme": 0.0312},
        "async/policy_lag": {"mean": 0.5, "extreme": 1.0}}
    assert off_policy(tmp_path / "none.log") is None


def test_fp8_rows_are_against_the_same_machines_bf16_run_with_the_issues_targets(tmp_path):
    from arc_experiments.figures import fp8

    def record(name, dtype, kv, generate, step, masked):
        per_step = [{"step": 1, "time/step": 99.0, "time/generate": 90.0, "memory/device_peak_gib": 60.0}]
        per_step += [{"step": n, "time/step": step, "time/generate": generate, "sampling/masked_frac": masked,
                      "sampling/sampling_logp_difference/mean": 0.01 * n, "memory/device_peak_gib": 50.0 + n}
                     for n in (2, 3)]
        return {"name": name, "rollout_dtype": dtype, "kv_cache_dtype": kv, "exit_code": 0,
                "run_summary": {"per_step": per_step}}

    machine = tmp_path / fp8.FOLDER / "1_h100"
    machine.mkdir(parents=True)
    for args in (("8b-rollout-bf16", "bf16", "auto", 32.0, 63.0, 0.0), ("8b-rollout-fp8", "fp8", "auto", 20.0, 49.0, 0.5),
                 ("8b-rollout-fp8-kv", "fp8", "fp8", 25.6, 56.0, 0.25)):
        (machine / f"rollout_{args[0]}.json").write_text(json.dumps(record(*args)))
    rows = {row["name"]: row for row in fp8.summary(tmp_path)["fp8_rollouts"]["rows"]}
    assert rows["8b-rollout-bf16"]["generate_speedup_vs_bf16"] == 1.0
    fp8_row = rows["8b-rollout-fp8"]
    assert fp8_row["generate_speedup_vs_bf16"] == 1.6 and fp8_row["generate_target_met"]  # 32 / 20 >= 1.4
    assert fp8_row["step_speedup_vs_bf16"] == round(63 / 49, 3) and fp8_row["step_target_met"]  # 49 <= 50
    assert fp8_row["sampling_logp_difference"] == 0.025 and fp8_row["is_masked_frac"] == 0.5  # steps 2-3 only
    assert fp8_row["peak_gib"] == 60.0  # the peak over every step, the first included
    kv_row = rows["8b-rollout-fp8-kv"]
    assert kv_row["generate_speedup_vs_bf16"] == 1.25 and not kv_row["generate_target_met"]
    assert not kv_row["step_target_met"]
    assert fp8.summary(tmp_path)["fp8_learning"].startswith("not measured")
    (machine / "rollout_8b-rollout-bf16.json").unlink()  # a machine without its bf16 baseline is refused
    with pytest.raises(FileNotFoundError, match="no bf16"):
        fp8.summary(tmp_path)


def test_the_fp8_sync_checks_verdicts_are_in_the_summary_per_machine(tmp_path):
    from arc_experiments.figures import fp8

    assert fp8.summary(tmp_path)["fp8_sync"].startswith("not measured")
    machine = tmp_path / fp8.FOLDER / "1_h100"
    machine.mkdir(parents=True)
    common = {"premise_weights_moved": True, "device": "H100", "vllm": "0.26.0", "fresh_fp8_vs_bf16_max_abs_logp": 2e-7}
    (machine / "fp8_sync_check.json").write_text(json.dumps(
        {**common, "passed": True, "synced_vs_fresh_fp8_max_abs_logp": 0.0}))
    (machine / "fp8_sync_no_hook.json").write_text(json.dumps({**common, "passed": False, "sync_error": "AssertionError()"}))
    checks = fp8.summary(tmp_path)["fp8_sync"]
    assert set(checks) == {"1_h100/fp8_sync_check.json", "1_h100/fp8_sync_no_hook.json"}
    assert checks["1_h100/fp8_sync_check.json"]["passed"] and checks["1_h100/fp8_sync_check.json"]["sync_error"] is None
    plain = checks["1_h100/fp8_sync_no_hook.json"]
    assert (plain["passed"], plain["sync_error"], plain["synced_vs_fresh_fp8_max_abs_logp"]) == (
        False, "AssertionError()", None)


def test_the_fp8_learning_runs_sampler_gap_and_is_figures_per_rollout_dtype_in_machine_and_seed_order():
    from arc_experiments.figures.fp8 import learning_sampling

    def record(arm, seed, gaps, ratio_mins):
        steps = [{"step": n, "sampling/sampling_logp_difference/mean": g, "sampling/masked_frac": 0.1 * n,
                  "sampling/importance_sampling_ratio/min": r} for n, (g, r) in enumerate(zip(gaps, ratio_mins), 1)]
        return {"arm": arm, "seed": seed, "run_summary": {"per_step": steps}}

    arms = {"m/fp8-s1": ("m", record("colocate-fp8", 1, [0.02, 0.04], [0.5, 0.25])),
            "m/fp8": ("m", record("colocate-fp8", 0, [0.01, 0.03], [0.9, None])),
            "m/bf16": ("m", record("colocate", 0, [0.001, 0.001], [0.99, 0.98])),
            "m/server": ("m", record("server", 0, [9.0], [0.0]))}  # another experiment's arm: left out
    found = learning_sampling(arms)
    assert [run["seed"] for run in found["fp8"]] == [0, 1] and len(found["bf16"]) == 1
    assert found["fp8"][1] == {"machine": "m", "seed": 1, "steps": 2, "sampling_logp_difference": 0.03,
                               "is_masked_frac": 0.15, "is_clipped_frac": None, "is_ratio_min": 0.25}
    assert found["fp8"][0]["is_ratio_min"] == 0.9  # a step that logged no ratio is skipped, not taken as 0


def test_an_fp8_run_its_machine_lost_is_a_row_from_its_trainer_log_with_the_queues_flags(tmp_path):
    from arc_experiments.figures import fp8

    machine = tmp_path / fp8.FOLDER / "1_h100"
    machine.mkdir(parents=True)
    logs_of(machine).mkdir(parents=True)
    steps = [{"step": n, "time/step": 60.0, "time/generate": 30.0, "sampling/importance_sampling_ratio/min": 0.5 / n,
              "sampling/importance_sampling_ratio/mean": 1.0} for n in (1, 2, 3)]
    (machine / "rollout_8b-rollout-bf16.json").write_text(json.dumps({
        "name": "8b-rollout-bf16", "rollout_dtype": "bf16", "kv_cache_dtype": "auto", "exit_code": 0,
        "run_summary": {"per_step": steps}}))
    (logs_of(machine) / "queue.log").write_text(
        "== 8b-rollout-bf16: python -m arc_trl train --config c.yaml --seed 0\n   rc=0 in 322 s\n"
        "== 8b-rollout-fp8-kv: python -m arc_trl train --config c.yaml --vllm_rollout_dtype fp8 "
        "--vllm_kv_cache_dtype fp8 --output_dir /tmp/x\n"
        "== 8b-rollout-fp8: python -m arc_trl train --vllm_rollout_dtype fp8\n")  # started, no log: no row
    (logs_of(machine) / "8b-rollout-bf16.log").write_text("{'time/step': '1'}\n")  # recorded: its record counts
    (logs_of(machine) / "8b-rollout-fp8-kv.log").write_text(
        " 33%|  | 1/3 {'loss': '0', 'time/generate': '25.5', 'time/step': '55.3', 'memory/device_peak_gib': '52.1'}\n"
        " 67%|  | 2/3 {'loss': '0', 'time/generate': '24', 'time/step': '50.0',"
        " 'sampling/importance_sampling_ratio/min': '1e-20', 'memory/device_peak_gib': '53'}\n")
    rows = {row["name"]: row for row in fp8.summary(tmp_path)["fp8_rollouts"]["rows"]}
    assert set(rows) == {"8b-rollout-bf16", "8b-rollout-fp8-kv"}
    assert rows["8b-rollout-bf16"]["is_ratio_min"] == 0.5 / 3 and "note" not in rows["8b-rollout-bf16"]
    lost = rows["8b-rollout-fp8-kv"]
    assert (lost["rollout_dtype"], lost["kv_cache_dtype"], lost["exit_code"]) == ("fp8", "fp8", None)
    assert lost["steps_measured"] == 1 and lost["generate_s"] == 24.0 and lost["step_s"] == 50.0  # step 2 only
    assert lost["generate_speedup_vs_bf16"] == 1.25 and lost["peak_gib"] == 53.0 and lost["is_ratio_min"] == 1e-20
    assert lost["log"] == "lab/logs/gpu_fp8/1_h100/8b-rollout-fp8-kv.log" and "after 2 logged step(s)" in lost["note"]


def test_fp8_profile_runs_are_rows_without_their_profiled_step_and_without_a_baseline_on_a_machine_with_none(
        tmp_path):
    """`fp8-profile` on a second queue (queue-b.log): a finished run's row from its profile's run summary, a run the
    machine lost from its trainer log, the step under torch.profiler left out of both; no bf16 run there: no
    speed-ups (not an error, as a machine of `fp8-8b` without its bf16 run is)."""
    from arc_experiments.figures import fp8

    machine = tmp_path / fp8.FOLDER / "3_h200x4"
    machine.mkdir(parents=True)
    logs_of(machine).mkdir(parents=True)
    command = ("python benchmarks/profile_step.py --out /o/{0}.json --torch-profile-step 3 -- --config c.yaml "
               "--vllm_rollout_dtype fp8{1} --output_dir /r")
    (logs_of(machine) / "queue-b.log").write_text(
        f"== build-8b: python -m arc_trl build-tiny-model\n== profile_8b-rollout-fp8: "
        f"{command.format('profile_8b-rollout-fp8', '')}\n   rc=0 in 656 s\n"
        f"== profile_8b-rollout-fp8-kv: {command.format('profile_8b-rollout-fp8-kv', ' --vllm_kv_cache_dtype fp8')}\n")
    steps = [{"step": n, "time/step": 50.0 + n, "time/generate": 25.0 + n} for n in (1, 2, 3)]
    (machine / "profile_8b-rollout-fp8.json").write_text(json.dumps({"run_summary": {"per_step": steps}}))
    (logs_of(machine) / "profile_8b-rollout-fp8-kv.log").write_text(
        " 33%| 1/3 {'time/generate': '26', 'time/step': '54'}\n 67%| 2/3 {'time/generate': '25', 'time/step': '53'}\n")
    rows = {row["name"]: row for row in fp8.machine_rows(machine)}
    weights, kv = rows["profile_8b-rollout-fp8"], rows["profile_8b-rollout-fp8-kv"]
    assert (weights["steps_measured"], weights["generate_s"], weights["step_s"], weights["exit_code"]) == (
        1, 27.0, 52.0, 0)  # step 2: step 1 warms up, step 3 ran under the profiler
    assert (kv["kv_cache_dtype"], kv["steps_measured"], kv["generate_s"], kv["exit_code"]) == ("fp8", 1, 25.0, None)
    assert "after 2 logged step(s)" in kv["note"] and kv["log"] == "lab/logs/gpu_fp8/3_h200x4/profile_8b-rollout-fp8-kv.log"
    assert all(r["baseline"] is None and r["generate_speedup_vs_bf16"] is None for r in rows.values())
    (logs_of(machine) / "queue-c.log").write_text(  # the same run in a later queue: one row; a run with no step: none
        f"== profile_8b-rollout-fp8: {command.format('profile_8b-rollout-fp8', '')}\n"
        f"== profile_8b-rollout-bf16: {command.format('profile_8b-rollout-bf16', '')}\n")
    (logs_of(machine) / "profile_8b-rollout-bf16.log").write_text("Loading weights\n")
    assert [row["name"] for row in fp8.machine_rows(machine)] == ["profile_8b-rollout-fp8", "profile_8b-rollout-fp8-kv"]


def test_fp8_layouts_sit_beside_their_bf16_twin_of_the_same_machine(tmp_path):
    """Phase F8's records (multigpu stage): the FP8 layout's step against its bf16 twin's, the async wait kept apart,
    the dtypes read from the layout's flags; an FP8 layout without its twin is refused."""
    from arc_experiments.figures import fp8

    def record(layout, flags, step, wait, masked):
        per_step = [{"step": 1, "time/step": 60.0, "time/generate": 30.0}]
        per_step += [{"step": n, "time/step": step, "time/generate": wait + 0.1, "async/wait_s": wait,
                      "sampling/masked_frac": masked} for n in (2, 3)]
        return {"layout": layout, "gpus": 2, "config": "c", "exit_code": 0, "beside": ["other"],
                "extra_flags": ["--async_rollouts", "1", *flags], "run_summary": {"per_step": per_step}}

    machine = tmp_path / "results" / "gpu_multigpu" / "7_h100x4"
    machine.mkdir(parents=True)
    (machine / "machine.json").write_text("{}")
    (machine / "layout_2gpu-server-async1.json").write_text(json.dumps(record("2gpu-server-async1", [], 33.0, 4.0, 0.0)))
    (machine / "layout_2gpu-server-async1-fp8.json").write_text(json.dumps(
        record("2gpu-server-async1-fp8", ["--vllm_rollout_dtype", "fp8", "--vllm_kv_cache_dtype", "fp8"], 30.0, 1.0,
               0.02)))
    (machine / "layout_1gpu-colocate.json").write_text(json.dumps(record("1gpu-colocate", [], 63.0, 0.0, 0.0)))

    bf16, fp8_row = fp8.summary(tmp_path)["fp8_layouts"]["rows"]

    assert (bf16["name"], bf16["rollout_dtype"], bf16["kv_cache_dtype"]) == ("2gpu-server-async1", "bf16", "auto")
    assert (fp8_row["rollout_dtype"], fp8_row["kv_cache_dtype"], fp8_row["machine"]) == ("fp8", "fp8", "7_h100x4")
    assert fp8_row["step_speedup_vs_bf16"] == 1.1 and bf16["step_speedup_vs_bf16"] == 1.0  # 33 / 30
    assert (fp8_row["wait_s"], bf16["wait_s"]) == (1.0, 4.0) and fp8_row["is_masked_frac"] == 0.02
    assert fp8_row["beside"] == ["other"]
    (machine / "layout_2gpu-server-async1.json").unlink()
    with pytest.raises(FileNotFoundError, match="bf16 twin"):
        fp8.summary(tmp_path)
