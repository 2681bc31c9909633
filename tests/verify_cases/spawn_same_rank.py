"""Ignores the process index that mp.spawn passes and takes the rank from args: both processes join as rank 0."""

import datetime

import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 2


def train(_, rank: int, world_size: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=10))
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(0, WORLD_SIZE), nprocs=WORLD_SIZE)  # expect: PFL302
