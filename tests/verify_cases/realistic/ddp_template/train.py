"""A one-file DDP template as repositories have them: argparse, torchrun's environment, nccl, `.cuda()`,
torchvision's CIFAR10 with download=True, a log file per rank and a checkpoint every epoch.

    torchrun --nproc-per-node 2 train.py --data ./data
"""

import argparse
import logging
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="CIFAR10 on every GPU of the node")
    parser.add_argument("--data", required=True, help="where CIFAR10 is (or is downloaded to)")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default="results")
    return parser.parse_args()


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def main() -> None:
    args = parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    rank = dist.get_rank()
    os.makedirs(args.out, exist_ok=True)
    logging.basicConfig(filename=os.path.join(args.out, f"train_rank{rank}.log"), level=logging.INFO)

    normalize = transforms.Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))
    train_set = datasets.CIFAR10(args.data, train=True, download=True,
                                 transform=transforms.Compose([transforms.ToTensor(), normalize]))
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, pin_memory=True)

    model = DDP(Net().cuda(), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for images, labels in loader:
            images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        logging.info("epoch %d loss %.4f", epoch, loss.item())
        torch.save(model.module.state_dict(), os.path.join(args.out, "checkpoint.pt"))  # expect: PFL201
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
