"""Two-process training on one machine, the command line's options handed to each process."""

import argparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def main(rank: int, args: argparse.Namespace) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-size", type=int, default=2)
    args = parser.parse_args()
    mp.spawn(main, args=(args), nprocs=args.world_size)  # expect: PFL302
