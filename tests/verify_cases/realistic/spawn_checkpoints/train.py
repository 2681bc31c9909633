"""A one-file DDP tutorial: mp.spawn starts one process per GPU, and rank 0 keeps only the newest checkpoint,
removing the one before it, and copies the best one aside.

    python train.py
"""

import os
import shutil

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train(rank: int, world_size: int, epochs: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(256, 20), torch.randint(0, 4, (256,)))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)).to(rank), device_ids=[rank])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    os.makedirs("checkpoints", exist_ok=True)
    previous, best = None, float("inf")
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for features, labels in loader:
            loss = nn.functional.cross_entropy(model(features.to(rank)), labels.to(rank))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            path = os.path.join("checkpoints", f"epoch_{epoch}.pt")
            torch.save({"epoch": epoch, "model": model.state_dict()}, path)
            if previous is not None:
                os.remove(previous)
            previous = path
            if loss.item() < best:
                best = loss.item()
                shutil.copyfile(path, os.path.join("checkpoints", "best.pt"))
            print(f"epoch {epoch}: loss {loss.item():.3f}, saved {path}")
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(train, args=(world_size, 3), nprocs=world_size, join=True)
