"""ImageNet-style training on every GPU of the node with nn.DataParallel: top-1 and top-5 accuracy measured on each
training batch, a checkpoint after each epoch.

    python dataparallel.py --epochs 2
"""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from metrics import accuracy

parser = argparse.ArgumentParser(description="ImageNet-style training with DataParallel")
parser.add_argument("--epochs", default=90, type=int)
parser.add_argument("-b", "--batch-size", default=8, type=int)
parser.add_argument("--lr", default=0.1, type=float)
parser.add_argument("--gpus", default=None, type=lambda ids: [int(i) for i in ids.split(",")], help="e.g. 0,1")


def train(loader: DataLoader, model: nn.Module, criterion: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    model.train()
    for images, target in loader:
        images, target = images.cuda(non_blocking=True), target.cuda(non_blocking=True)
        output = model(images)
        loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.3f} acc@1 {acc1.item():.1f} acc@5 {acc5.item():.1f}")


def main() -> None:
    args = parser.parse_args()
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 100))
    model = nn.DataParallel(model, device_ids=args.gpus).cuda()
    criterion = nn.CrossEntropyLoss().cuda()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    images = TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 100, (64,)))
    loader = DataLoader(images, batch_size=args.batch_size, shuffle=True)
    for epoch in range(args.epochs):
        train(loader, model, criterion, optimizer)
        torch.save({"epoch": epoch + 1, "state_dict": model.state_dict()}, "checkpoint.pth.tar")


if __name__ == "__main__":
    main()
