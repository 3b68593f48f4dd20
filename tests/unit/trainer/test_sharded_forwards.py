"""`sharded_padding`: under ZeRO-3 / FSDP with several processes each pads its forwards to the largest count."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from accelerate.utils import DistributedType

from arc_trl.trainer.sharded_forwards import sharded_padding


def accelerator(kind: DistributedType, counts: list[int]) -> SimpleNamespace:
    """A stand-in for `len(counts)` processes whose `gather` returns every process's count."""
    return SimpleNamespace(num_processes=len(counts), distributed_type=kind, device="cpu",
                           gather=lambda local: torch.tensor(counts))


@pytest.mark.parametrize("kind", [DistributedType.DEEPSPEED, DistributedType.FSDP])
def test_each_process_pads_to_the_largest_count_under_sharding(kind):
    counts = [3, 5, 0]
    assert [sharded_padding(accelerator(kind, counts), count) for count in counts] == [2, 0, 5]


@pytest.mark.parametrize(("kind", "counts"), [(DistributedType.MULTI_GPU, [3, 5]), (DistributedType.DEEPSPEED, [3])])
def test_no_padding_without_sharding_or_with_one_process(kind, counts):
    assert sharded_padding(accelerator(kind, counts), counts[0]) == 0
