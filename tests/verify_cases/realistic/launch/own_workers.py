"""Starts its own rank processes with multiprocessing.Process, as the PyTorch distributed tutorial does."""

import os

import torch
import torch.distributed as dist
from torch.multiprocessing import Process


def run(rank: int, size: int) -> None:
    tensor = torch.ones(1) * rank
    dist.all_reduce(tensor)
    print(f"rank {rank}: {tensor.item()}")


def init_process(rank: int, size: int) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    dist.init_process_group("gloo", rank=rank, world_size=size)
    run(rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    processes = []
    for rank in range(2):
        process = Process(target=init_process, args=(rank, 2))
        process.start()
        processes.append(process)
    for process in processes:
        process.join()
