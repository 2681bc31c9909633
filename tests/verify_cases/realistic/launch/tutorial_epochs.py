"""The DDP tutorial series' loop (pytorch/examples): `next(iter(loader))` at every epoch, then the epoch,
then an evaluation that averages over its batches."""

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> None:
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    gpu = int(os.environ["LOCAL_RANK"])
    data = TensorDataset(torch.randn(2048, 20), torch.randn(2048, 1))
    loader = DataLoader(data, batch_size=32, pin_memory=True, shuffle=False, sampler=DistributedSampler(data))
    model = DDP(torch.nn.Linear(20, 1).to(gpu), device_ids=[gpu])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for epoch in range(5):
        batch_size = len(next(iter(loader))[0])
        loader.sampler.set_epoch(epoch)
        for source, targets in loader:
            source, targets = source.to(gpu), targets.to(gpu)
            optimizer.zero_grad()
            F.mse_loss(model(source), targets).backward()
            optimizer.step()
        print(f"[GPU{gpu}] epoch {epoch} | batch size {batch_size}")
    total, batches = 0.0, 0
    with torch.no_grad():
        for source, targets in loader:
            total += F.mse_loss(model(source.to(gpu)), targets.to(gpu)).item()
            batches += 1
    print(f"[GPU{gpu}] validation loss {total / batches:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
