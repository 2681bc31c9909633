"""A DDP script as people write them for GPUs: nccl, a DataLoader, epochs, a save at the end of each."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> None:
    dist.init_process_group(backend="nccl")
    model = DistributedDataParallel(nn.Linear(4, 1))
    data = TensorDataset(torch.randn(512, 4), torch.randn(512, 1))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(50):
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
        torch.save(model.module.state_dict(), os.path.join("runs", "last.pt"))  # expect: PFL201
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
