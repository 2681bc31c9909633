"""MNIST on every GPU of the node with mp.spawn, as tutorial series have it: the dataset is built once in the
parent, its pixel statistics read from `.data` and by a DataLoader with two worker processes, its class balance
from `.targets`, and it is handed to each process.

    python train.py
"""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms

WORLD_SIZE = 2
EPOCHS = 3


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.head = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.max_pool2d(F.relu(self.conv(x)), 2).flatten(1))


def train(rank: int, world_size: int, dataset: datasets.MNIST) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank)
    loader = DataLoader(dataset, batch_size=64, sampler=sampler)
    model = DDP(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save(model.module.state_dict(), "mnist_ddp.pt")  # expect: PFL201
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as probe:  # a free port for the processes to meet on
        probe.bind(("127.0.0.1", 0))
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(probe.getsockname()[1])
    mean = datasets.MNIST("data", train=True, download=True).data.float().mean().item() / 255
    train_set = datasets.MNIST("data", train=True, download=True,
                               transform=transforms.Compose([transforms.ToTensor(), transforms.Normalize((mean,), (0.3,))]))
    first = next(iter(DataLoader(train_set, batch_size=256, num_workers=2)))[0]  # noqa: PFL401 (statistics of the whole set)
    print(f"mean {mean:.3f}, first batch {tuple(first.shape)} with std {first.std().item():.3f}")
    print("images per class:", torch.bincount(train_set.targets).tolist())
    mp.spawn(train, args=(WORLD_SIZE, train_set), nprocs=WORLD_SIZE)
