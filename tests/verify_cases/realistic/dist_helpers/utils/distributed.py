"""Process-group helpers: the scripts are launched with `torchrun --nproc-per-node N`."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def init_distributed() -> int:
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    torch.cuda.set_device(local_rank)
    return local_rank


def wrap(model: torch.nn.Module, local_rank: int) -> DDP:
    return DDP(model.cuda(local_rank), device_ids=[local_rank])


def is_main_process() -> bool:
    return dist.get_rank() == 0
