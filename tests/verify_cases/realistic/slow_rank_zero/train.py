"""DDP training where rank 0 evaluates after every epoch and reports to a metrics server while the other ranks wait at
a barrier; a last-epoch summary is reduced on rank 0 only.

    torchrun --nproc-per-node 2 train.py
"""

import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

EPOCHS = 10


def report_metrics(epoch: int, accuracy: float) -> None:
    time.sleep(8)  # the metrics server answers slowly
    print(f"epoch {epoch}: accuracy {accuracy:.3f}")


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for features, labels in loader:
            correct += (model(features).argmax(1) == labels).sum().item()
            total += labels.numel()
    model.train()
    return correct / total


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    train_set = TensorDataset(torch.randn(256, 16), torch.randint(0, 3, (256,)))
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=32, sampler=sampler)
    val_loader = DataLoader(TensorDataset(torch.randn(64, 16), torch.randint(0, 3, (64,))), batch_size=32)
    model = DDP(nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for features, labels in loader:
            loss = nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            report_metrics(epoch, evaluate(model.module, val_loader))
        dist.barrier()
        if rank == 0 and epoch == EPOCHS - 1:
            dist.all_reduce(loss.detach())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
