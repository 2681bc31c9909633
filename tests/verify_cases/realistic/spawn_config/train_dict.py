"""Two-process training on one machine, the settings in a dict handed to each process."""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def main(rank: int, cfg: dict) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=cfg.world_size)
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    cfg = {"world_size": 2}
    mp.spawn(main, args=(cfg), nprocs=cfg["world_size"])  # expect: PFL302
