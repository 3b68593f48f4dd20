"""One trainer process of tests/integration/test_async_rollouts_processes.py (2 processes, gloo, CPU; started with
torchrun's environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

`python async_rollouts_worker.py MODEL_DIR OUT SCHEDULING OVERLAP_URL RESUME_URL`: two tiny `async_rollouts: 1` runs
in server mode (tests/async_harness.py), each against its own stand-in server, which the test runs and which keeps
the one ordered log of what both processes did (`post`: an event to the server's `/event`):

- `overlap`: 3 steps. Each process reports its weight-sync calls (`sync`), the main process the push itself
  (`push`, which the server holds while it watches for requests), every rollout it played (`played`: its rows,
  the thread), its steps' `pre_optimizer` and `optimizer_step`; at `pre_optimizer` it asks the server to `wait` for
  a request of its next step's rows (the server holds those until this step's `pre_optimizer`);
- `resume`: stopped after step 1 (step 2's rollout in flight), then `train(resume_from_checkpoint=checkpoint-2)`.

Writes OUT/rank<k>.json: per run, what this process trained (rows, policy versions), its logged `async/*` values,
its rollouts' history and what was in flight at the end.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import requests
from async_harness import FakeVLLMGeneration, build_trainer, record_trained, rollout_in_flight
from transformers import TrainerCallback

TASKS = ("0d3d703e", "44f52bb0", "5582e5ca", "6150a2bd", "74dd1130", "d037b0a7", "d631b094", "e9afcf9a")  # sorted
STEPS = 3
ASYNC_KEYS = ("async/policy_lag", "async/policy_lag_max", "async/dropped_rollouts", "async/wait_s")
COLLECTIVE_TIMEOUT_S = 90  # a collective one process never joins fails the run instead of hanging it


def post(url: str, **event) -> dict:
    reply = requests.post(f"{url}/event", json=event, timeout=120)
    reply.raise_for_status()
    return reply.json()


class Marks(TrainerCallback):
    """This process's optimizer steps to the server; with `hold`, each step waits there (bounded) for a request of the
    next step's rows, which the server answers only after this step's `pre_optimizer`."""

    def __init__(self, url: str, rank: int, local: list, hold: bool) -> None:
        self.url, self.rank, self.local, self.hold = url, rank, local, hold

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        step = state.global_step
        post(self.url, kind="pre_optimizer", rank=self.rank, step=step)
        if self.hold and step + 1 < state.max_steps:
            self.local.append(["waited", step, post(self.url, kind="wait", rank=self.rank, step=step + 1)["seen"]])

    def on_optimizer_step(self, args, state, control, **kwargs):
        post(self.url, kind="optimizer_step", rank=self.rank, step=state.global_step)


class StopAt2(TrainerCallback):
    def __init__(self) -> None:
        self.active = True

    def on_step_end(self, args, state, control, **kwargs):
        if self.active and state.global_step == 2:
            control.should_training_stop = True


def wired_trainer(model_dir: str, out: Path, url: str, scheduling: str, hold: bool, **grpo):
    """The trainer, reporting to the server at `url`, and this process's own record (a list)."""
    trainer, task_of = build_trainer(model_dir, out, url, TASKS, 1, scheduling, max_steps=STEPS,
                                     ddp_timeout=COLLECTIVE_TIMEOUT_S, **grpo)
    rank, local = trainer.accelerator.process_index, []

    def on_sync() -> None:  # TRL's server-mode sync_weights: every process walks the weights, the main one pushes
        step = trainer.state.global_step
        local.append(["sync", step, rollout_in_flight(trainer)])
        post(url, kind="sync", rank=rank, step=step)
        if trainer.accelerator.is_main_process:
            post(url, kind="push", rank=rank, step=step)

    trainer.vllm_generation.on_sync = on_sync
    play = trainer.rollout.play

    def played(rows, *args, **kwargs):
        episodes = play(rows, *args, **kwargs)
        post(url, kind="played", rank=rank, tasks=[row["task_id"] for row in rows],
             thread=threading.current_thread().name)
        return episodes

    trainer.rollout.play = played
    record_trained(trainer, lambda *event: local.append(list(event)))
    trainer.add_callback(Marks(url, rank, local, hold))
    post(url, kind="prompts", rank=rank, prompts=[[list(ids), task] for ids, task in task_of.items()])
    trainer.accelerator.wait_for_everyone()  # the server knows every prompt before the first request
    return trainer, local


def summary(trainer, local: list) -> dict:
    manager = trainer.async_rollouts
    return {"local": list(local), "history": [dict(h) for h in manager.history], "dropped": manager.dropped,
            "pending": manager.pending is not None, "global_step": trainer.state.global_step,
            "logged": {key: [e[key] for e in trainer.state.log_history if key in e] for key in ASYNC_KEYS}}


def overlap_run(model_dir: str, out: Path, url: str, scheduling: str) -> dict:
    trainer, local = wired_trainer(model_dir, out, url, scheduling, hold=True)
    try:
        trainer.train()
        return summary(trainer, local)
    finally:
        trainer.close()


def resume_run(model_dir: str, out: Path, url: str, scheduling: str) -> dict:
    # save_only_model: with several CPU processes Trainer loads the optimizer state to args.device, cpu:0, which
    # torch.load cannot map to ("don't know how to restore data location ... cpu:0"); the model and the trainer
    # state (global_step) are what the resume needs here
    trainer, local = wired_trainer(model_dir, out, url, scheduling, hold=False, save_strategy="steps", save_steps=1,
                                   save_only_model=True)
    stop = StopAt2()
    trainer.add_callback(stop)
    try:
        trainer.train()
        first = summary(trainer, local)
        post(url, kind="resume", rank=trainer.accelerator.process_index)
        trainer.accelerator.wait_for_everyone()
        stop.active = False
        local.clear()
        trainer.train(resume_from_checkpoint=str(out / "checkpoint-2"))
        return {"first": first, "resumed": summary(trainer, local)}
    finally:
        trainer.close()


def main(model_dir: str, out_dir: str, scheduling: str, overlap_url: str, resume_url: str) -> None:
    import trl.trainer.grpo_trainer as grpo_trainer

    grpo_trainer.VLLMGeneration = FakeVLLMGeneration  # TRL's would open an NCCL group to the server
    out = Path(out_dir)
    results = {"overlap": overlap_run(model_dir, out / "overlap", overlap_url, scheduling)}
    results["resume"] = resume_run(model_dir, out / "resume", resume_url, scheduling)
    import torch.distributed as dist

    rank = dist.get_rank()
    (out / f"rank{rank}.json").write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:6])
