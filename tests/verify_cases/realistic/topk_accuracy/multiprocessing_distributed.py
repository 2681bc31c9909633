"""ImageNet-style training with DistributedDataParallel, one process per GPU started by mp.spawn: top-1 and top-5
accuracy measured on each training batch, a checkpoint from rank 0 after each epoch.

    python multiprocessing_distributed.py --epochs 2
"""

import argparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from metrics import accuracy

parser = argparse.ArgumentParser(description="ImageNet-style training with DDP")
parser.add_argument("--epochs", default=90, type=int)
parser.add_argument("-b", "--batch-size", default=8, type=int)
parser.add_argument("--lr", default=0.1, type=float)
parser.add_argument("--nprocs", default=None, type=int, help="processes to start (default: one per GPU)")


def main_worker(local_rank: int, nprocs: int, args: argparse.Namespace) -> None:
    dist.init_process_group(backend="nccl", world_size=nprocs, rank=local_rank)
    torch.cuda.set_device(local_rank)
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 100))
    model = nn.parallel.DistributedDataParallel(model.cuda(local_rank), device_ids=[local_rank])
    criterion = nn.CrossEntropyLoss().cuda(local_rank)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    images = TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 100, (64,)))
    sampler = DistributedSampler(images)
    loader = DataLoader(images, batch_size=args.batch_size, sampler=sampler)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for images_batch, target in loader:
            images_batch, target = images_batch.cuda(local_rank), target.cuda(local_rank)
            output = model(images_batch)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if local_rank == 0:
            torch.save({"epoch": epoch + 1, "state_dict": model.state_dict()}, "checkpoint.pth.tar")
    dist.destroy_process_group()


def main() -> None:
    args = parser.parse_args()
    nprocs = args.nprocs or torch.cuda.device_count()
    mp.spawn(main_worker, nprocs=nprocs, args=(nprocs, args))


if __name__ == "__main__":
    main()
