"""ImageNet training with DDP started by mp.spawn, as distributed tutorials write it: the batch size given is the
node's, divided among its GPUs, 3200 images by default; a checkpoint every epoch.

    python multiprocessing_distributed.py --batch-size 3200 --epochs 100
"""

import argparse
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
parser.add_argument("-j", "--workers", default=2, type=int, help="number of data loading workers")
parser.add_argument("--epochs", default=100, type=int, help="number of total epochs to run")
parser.add_argument("-b", "--batch-size", default=3200, type=int,
                    help="mini-batch size, the total batch size of all GPUs on the current node")
parser.add_argument("--lr", "--learning-rate", default=0.1, type=float)


class DecodedImages(Dataset):
    """Stands for ImageFolder over JPEG files: each image takes a while to read and decode."""

    def __len__(self) -> int:
        return 1281167

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.05)  # read and decode one JPEG
        return torch.randn(3, 32, 32), index % 1000


def main() -> None:
    args = parser.parse_args()
    args.nprocs = torch.cuda.device_count()
    mp.spawn(main_worker, nprocs=args.nprocs, args=(args.nprocs, args))


def main_worker(local_rank: int, nprocs: int, args: argparse.Namespace) -> None:
    dist.init_process_group(backend="nccl", init_method="env://", world_size=nprocs, rank=local_rank)
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 1000))
    torch.cuda.set_device(local_rank)
    model.cuda(local_rank)
    # The batch size given is the node's: each process takes its share.
    args.batch_size = int(args.batch_size / nprocs)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    criterion = nn.CrossEntropyLoss().cuda(local_rank)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    train_dataset = DecodedImages()
    train_sampler = DistributedSampler(train_dataset)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, num_workers=args.workers, pin_memory=True,
                              sampler=train_sampler)
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        for images, target in train_loader:
            images, target = images.cuda(local_rank, non_blocking=True), target.cuda(local_rank, non_blocking=True)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save({"epoch": epoch + 1, "state_dict": model.state_dict()}, "checkpoint.pth.tar")


if __name__ == "__main__":
    main()
