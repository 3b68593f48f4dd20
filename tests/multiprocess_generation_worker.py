"""One process of `tests/integration/test_multiprocess_generation.py` (run under torchrun, gloo backend, CPU).

Drives `arc_trl.rollout.TrainerGenerator` in server mode both ways, with a recording stand-in for `VLLMClient` that
returns a deterministic completion per prompt:
- `streamed` (the default): each process's own single-prompt requests through its own client (`ServerStream`);
- `gathered` (what a structured-output regex falls back to): TRL's real `GRPOTrainer._generate_single_turn` ->
  `VLLMGeneration.generate` server branch (gather, main-process call, broadcast, per-process slice), made safe by
  `aligned_generate`.
Writes what each process got to OUT/rank<k>.json.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import torch.distributed as dist

EOS = 2


def completion_for(prompt: list[int], max_tokens: int) -> list[int]:
    """The stand-in server's deterministic completion of `prompt`: 3..9 tokens that depend on the whole prompt."""
    seed = sum((i + 1) * t for i, t in enumerate(prompt))
    body = [10 + (seed * 31 + 7 * k) % 900 for k in range(3 + seed % 7)]
    return (body + [EOS])[:max_tokens]


def logprob_of(token: int, position: int):
    return None if position == 1 else -((token % 13) + 1) / 10.0  # position 1: a value vLLM could not give (NaN)


class RecordingClient:
    """Stands in for `trl.generation.vllm_client.VLLMClient` (same `generate` signature and return shape)."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def generate(self, prompts, features=None, n=1, max_tokens=16, logprobs=0, **_):
        self.calls.append({"num_prompts": len(prompts), "max_tokens": max_tokens})
        completions = [completion_for(p, max_tokens) for p in prompts for _ in range(n)]
        return {
            "prompt_ids": [list(p) for p in prompts],
            "completion_ids": completions,
            "logprobs": [[[logprob_of(t, i)] for i, t in enumerate(c)] for c in completions],
            "logprob_token_ids": [[[t] for t in c] for c in completions],
        }


def fake_trainer(accelerator, client, regex: str | None = None):
    from trl import GRPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration

    vllm_generation = VLLMGeneration.__new__(VLLMGeneration)  # its __init__ would connect to a real server
    vllm_generation.__dict__.update(
        accelerator=accelerator, mode="server", vllm_client=client, tensor_parallel_size=1, enable_sleep_mode=False,
        temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=1.0, max_completion_length=16,
        logprobs=0, structured_outputs_regex=regex, generation_kwargs={},
    )

    class FakeTrainer:
        _generate_single_turn = GRPOTrainer._generate_single_turn  # TRL's real code path

    trainer = FakeTrainer()
    trainer.__dict__.update(
        accelerator=accelerator, use_vllm=True, vllm_generation=vllm_generation, eos_token_ids=[EOS],
        state=SimpleNamespace(global_step=0), _last_loaded_step=0, args=SimpleNamespace(report_to=[]),
        _arc_stream_clients=[client],  # this process's own client (streamed mode)
    )
    return trainer


# (requests of process 0, cap of process 0, requests of process 1, cap of process 1)
CASES = {
    "process0_has_more": ([[5, 6, 7], [8, 9], [11, 12, 13, 14]], 40, [[21, 22]], 40),
    "process1_has_more": ([[5, 6, 7]], 40, [[21, 22], [23], [24, 25, 26]], 40),
    "caps_differ": ([[5, 6, 7], [8, 9]], 4, [[21, 22]], 40),
    "process1_has_none": ([[5, 6, 7], [8, 9]], 40, [], 40),
}


def main(out_dir: str) -> None:
    dist.init_process_group("gloo")
    from accelerate import Accelerator

    from arc_trl.rollout import TrainerGenerator

    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    results = {}
    for mode, regex in (("streamed", None), ("gathered", "[0-9]+")):
        client = RecordingClient()
        generator = TrainerGenerator(fake_trainer(accelerator, client, regex))
        results[mode] = {}
        for name, (req0, cap0, req1, cap1) in CASES.items():
            sequences, cap = (req0, cap0) if rank == 0 else (req1, cap1)
            try:
                ids, lps = generator.generate(sequences, cap)
                got = {"ids": ids, "logprobs": [[None if lp != lp else lp for lp in row] for row in lps]}
            except Exception as exc:  # noqa: BLE001 - reported to the test, which names the case
                got = {"error": f"{type(exc).__name__}: {exc}"}
            results[mode][name] = {
                "got": got,
                "expected_ids": [completion_for(s, cap) for s in sequences],
                "expected_logprobs": [
                    [logprob_of(t, i) for i, t in enumerate(completion_for(s, cap))] for s in sequences
                ],
            }
            dist.barrier()
        results[mode]["server_calls"] = client.calls
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
