"""GPU stages of FP8 rollouts (docs/fp8.md): the 8B recipe's step at bf16, FP8 weights and FP8 weights + KV cache,
back to back on one GPU; the engine-level sync check; the learning subject with bf16 vs FP8 rollouts, 3 seeds each."""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor

from arc_experiments.gpu.measure_stages import PY, RECIPE_8B, shape_8b, train
from arc_experiments.gpu.multigpu_stages import learning_arm, learning_run_name, learning_student
from arc_experiments.gpu.profile_stages import profile_run, recipe_8b_step
from arc_experiments.gpu.runner import ROOT, Context, failed, first_step, pool_gpus, run

ROLLOUTS_8B = {  # run name -> the rollout flags; measured in this order, on the same GPU
    "8b-rollout-bf16": [],
    "8b-rollout-fp8": ["--vllm_rollout_dtype", "fp8"],
    "8b-rollout-fp8-kv": ["--vllm_rollout_dtype", "fp8", "--vllm_kv_cache_dtype", "fp8"],
}
LEARNING_SEEDS = (0, 1, 2)


def learning_seeds(ctx: Context) -> tuple[int, ...]:
    """The learning stages' seeds: 0-2, or only `--seeds A,B` / `--seed N` (e.g. to replace lost runs; pairs need the
    same machine's student, so a replaced run's partner runs again beside it)."""
    if ctx.seeds and ctx.seed is not None:
        raise ValueError("--seed and --seeds: give one of them")
    flag = "--seeds" if ctx.seeds else "--seed"
    seeds = tuple(dict.fromkeys(ctx.seeds or ((ctx.seed,) if ctx.seed is not None else LEARNING_SEEDS)))  # no repeats
    unknown = [seed for seed in seeds if seed not in LEARNING_SEEDS]  # arms.yaml has a recipe for these seeds only
    if unknown:
        raise ValueError(f"{flag} {','.join(map(str, unknown))}: the FP8 learning stages run seeds "
                         f"{', '.join(map(str, LEARNING_SEEDS))}")
    return seeds


def fp8_8b(ctx: Context) -> int:
    """configs/qwen3-8b-1gpu-colocate.yaml (random 8B shape, every turn forced to its cap, 3 steps) at bf16, FP8
    weights and FP8 weights + KV cache, back to back: the step's parts (time/*), the sampler/trainer gap (sampling/*)
    and peak memory (memory/*) in each run's run_summary.json under WORK/runs/8b-rollout-*"""
    code, model = shape_8b(ctx)
    common = recipe_8b_step(model, ctx.steps or 3)
    codes = [code]
    for name, flags in ROLLOUTS_8B.items():
        codes.append(code or train(ctx, name, max(ctx.limit, 900), *common, *flags))
        if not code and not ctx.dry_run:
            write_rollout_record(ctx, name, flags, codes[-1])
    return failed(*codes)


PROFILE_PORT = "29777"  # the profiled run's rendezvous (MASTER_PORT): below the OS's ephemeral ports, which
# `arc-trl serve --auto-ports` picks for runs beside it on other GPUs of the machine; TRL's default is 29500 and up


def fp8_profile(ctx: Context) -> int:
    """The 8B recipe (as `fp8-8b`) at FP8 weights and at FP8 weights + FP8 KV cache, back to back, the last step under
    torch.profiler (benchmarks/profile_step.py -> OUT/profile_8b-rollout-fp8*.json): the attention kernel an FP8 KV
    cache runs and its time a decode step, beside the FP8-weights run's (docs/fp8.md: the KV cache's missing gain)."""
    code, model = shape_8b(ctx)
    steps = ctx.steps or 3
    codes = [code]
    for name, flags in ROLLOUTS_8B.items():
        if flags and not code:
            codes.append(profile_run(ctx, f"profile_{name}", ROOT, max(ctx.limit, 900), *recipe_8b_step(model, steps),
                                     *flags, torch_step=steps, env={"MASTER_PORT": PROFILE_PORT}))
    return failed(*codes)


def write_rollout_record(ctx: Context, name: str, flags: list[str], exit_code: int) -> None:
    """OUT/fp8/rollout_NAME.json: the run's settings, exit code and run summary (its per-step `time/*`, `sampling/*`
    and `memory/*`), what `python -m arc_experiments.figures step` reads from results/gpu_fp8/MACHINE/."""
    settings = dict(zip(flags[::2], flags[1::2]))
    summary = ctx.work / "runs" / name / "run_summary.json"
    record = {"name": name, "rollout_dtype": settings.get("--vllm_rollout_dtype", "bf16"),
              "kv_cache_dtype": settings.get("--vllm_kv_cache_dtype", "auto"), "flags": flags,
              "exit_code": exit_code, "config": RECIPE_8B,
              "run_summary": json.loads(summary.read_text()) if summary.exists() else None}
    (ctx.out / "fp8").mkdir(parents=True, exist_ok=True)
    (ctx.out / "fp8" / f"rollout_{name}.json").write_text(json.dumps(record))


def fp8_sync(ctx: Context) -> int:
    """The FP8 engine follows the new weights after a sync (benchmarks/fp8_sync_check.py, random qwen3-0.6b shape):
    FP8 weights, FP8 weights + KV cache, the server's push, and TRL's plain sync without the hook (expected to fail,
    recorded)"""
    check = [PY, "benchmarks/fp8_sync_check.py"]
    limit = 540  # three engines a run, each compiling and capturing CUDA graphs on the 0.6B shape
    codes = [run(ctx, "fp8-sync", limit, [*check, "--out", str(ctx.out / "fp8_sync_check.json")]),  # what counts first
             run(ctx, "fp8-sync-kv", limit, [*check, "--kv-cache-dtype", "fp8", "--out",
                                           str(ctx.out / "fp8_sync_check_kv.json")]),
             run(ctx, "fp8-sync-server", limit, [*check, "--server", "--out",
                                               str(ctx.out / "fp8_sync_check_server.json")])]
    plain = run(ctx, "fp8-sync-no-hook", limit, [*check, "--no-hook", "--out", str(ctx.out / "fp8_sync_no_hook.json")])
    if plain == 0 and not ctx.dry_run:
        print("fp8-sync-no-hook passed: the plain sync was expected to fail (see its JSON)", flush=True)
    return failed(*codes)


def fp8_learning(ctx: Context) -> int:
    """The learning subject (SmolLM2 after SFT, GRPO alone's chosen recipe, 20 steps, colocated) with bf16 and with
    FP8 rollouts, seeds 0-2, each seed's two runs side by side on one GPU (`side_by_side`; the student and the arms'
    configs made once, `learning_lock`), scored on the held-out tasks at steps 0, 10 and 20:
    OUT/multigpu/server_learning_colocate[-fp8][-sSEED].json."""
    return side_by_side(ctx, pair_runs(learning_seeds(ctx)))


def pair_runs(seeds: tuple[int, ...]) -> list[tuple[str, int]]:
    """Each seed's bf16 run, then its FP8 run: consecutive, so that `side_by_side` pairs them on one GPU."""
    return [(arm, seed) for seed in seeds for arm in ("colocate", "colocate-fp8")]


def tis_runs(seeds: tuple[int, ...]) -> list[tuple[str, int]]:
    """The FP8 arm with token-level truncated IS, a run a seed."""
    return [("colocate-fp8-tis", seed) for seed in seeds]


def fp8_learning_tis(ctx: Context) -> int:
    """The FP8 arm again with token-level truncated importance sampling (`vllm_importance_sampling_mode:
    token_truncate`) in place of TRL's sequence-level default, seeds 0-2 (two at a time on a GPU), against the same
    machine's bf16 runs of `fp8-learning`: OUT/multigpu/server_learning_colocate-fp8-tis[-sSEED].json."""
    return side_by_side(ctx, tis_runs(learning_seeds(ctx)))


def fp8_learning_all(ctx: Context) -> int:
    """`fp8-learning` and `fp8-learning-tis` in one pool of lanes (9 runs, 5 pairs): on a 4-GPU machine a lane each
    for three seeds' bf16 + FP8 pairs and one for two TIS seeds, the third TIS seed after the first pair; the same
    records as the two stages."""
    seeds = learning_seeds(ctx)
    return side_by_side(ctx, pair_runs(seeds) + tis_runs(seeds))


def side_by_side(ctx: Context, runs: list[tuple[str, int]]) -> int:
    """Learning runs (arm, seed) two at a time on a GPU, in order: consecutive runs make a pair (the second started
    once the first has logged a step, so that their engines do not profile memory at once); on a machine with
    several GPUs (`pool_gpus`) the pairs go round the GPUs, one lane a GPU, a lane's pairs one after another."""
    gpus = [gpu or "0" for gpu in pool_gpus(ctx)]
    # the student first, alone: a pair's wait for its first run's step must not spend itself on the student's SFT
    code = learning_student(ctx, gpus[0], max(ctx.limit, 1500))
    if code:
        return code
    pairs = [runs[i:i + 2] for i in range(0, len(runs), 2)]
    lanes = [pairs[i::len(gpus)] for i in range(len(gpus))]
    with ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        done = [pool.submit(lambda gpu=gpu, lane=lane: [code for pair in lane for code in run_pair(ctx, pair, gpu)])
                for gpu, lane in zip(gpus, lanes) if lane]
        return failed(*(code for lane in done for code in lane.result()))


def run_pair(ctx: Context, pair: list[tuple[str, int]], gpu: str) -> list[int]:
    """One or two learning runs side by side on `gpu` (0.3 of it for each one's vLLM): their exit codes."""
    limit = max(ctx.limit, 1500)
    with ThreadPoolExecutor(max_workers=2) as pool:
        (arm, seed), rest = pair[0], pair[1:]
        first = pool.submit(learning_arm, ctx, arm, gpu, limit, seed)
        if rest and not ctx.dry_run:  # the second run's engine starts once the first one has taken its memory
            log = ctx.work / "logs" / f"server-learning-{learning_run_name(arm, seed)}.log"
            first_step(log, FutureProcess(first))
        second = [pool.submit(learning_arm, ctx, a, gpu, limit, s) for a, s in rest]
        return [first.result(), *(run.result() for run in second)]


class FutureProcess:
    """A `Future` seen as a process by `runner.first_step` (running until the future is done)."""

    def __init__(self, future: Future) -> None:
        self.future = future

    def poll(self) -> int | None:
        return 0 if self.future.done() else None
