"""Forwards under sharded parameters (DeepSpeed ZeRO-3, FSDP) with several processes are collective: each layer's
parameters are gathered from every process, so every process must run as many forwards, even one with less to do.
"""

from __future__ import annotations


def sharded_padding(accelerator, count: int) -> int:
    """Sequences this process must add to its `count` so that every process runs as many forwards (the largest count):
    0 without sharding or with one process. Collective otherwise (a gather): every process calls it.
    (The peer teacher's forwards, whose counts differ by process: arc_trl/trainer/teacher_term.py.)"""
    from accelerate.utils import DistributedType

    if accelerator.num_processes < 2 or accelerator.distributed_type not in (DistributedType.DEEPSPEED,
                                                                             DistributedType.FSDP):
        return 0
    import torch

    counts = accelerator.gather(torch.tensor([count], device=accelerator.device))
    return int(counts.max()) - count
