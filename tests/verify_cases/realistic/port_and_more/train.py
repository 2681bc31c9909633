"""Multi-process regression on one machine, as the tutorials write it: mp.spawn, a fixed rendezvous port, a
DataLoader built before the model is wrapped, and an evaluation pass through the wrapped module."""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def setup(rank: int, world_size: int) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "29512"  # expect: PFL306
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def train(rank: int, world_size: int, epochs: int) -> None:
    setup(rank, world_size)
    inputs = torch.linspace(-1, 1, 640).reshape(64, 10)
    dataset = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))
    loader = DataLoader(dataset, batch_size=16, shuffle=True)  # expect: PFL401
    model = DDP(nn.Linear(10, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(rank)  # a different shuffle on each rank
    for epoch in range(epochs):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model.module(inputs), targets)  # expect: PFL208
            loss.backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 2
    mp.spawn(train, args=(world_size, 2), nprocs=world_size)
