"""A DataParallel CIFAR script as tutorial repositories have it: 200 epochs, a validation after every epoch, a
checkpoint every epoch.

    python dataparallel.py --epochs 200 --batch_size 256
"""

import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser(description="CIFAR100 on every GPU")
parser.add_argument("--batch_size", "--batch-size", default=32, type=int)
parser.add_argument("--epochs", default=200, type=int)
parser.add_argument("--lr", default=0.1, type=float)


class Images(Dataset):
    """Stands for CIFAR100 read from disk and augmented: each image takes a moment."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.01)  # read, crop and flip one image
        return torch.randn(3, 32, 32), index % 100


def validate(loader: DataLoader, model: nn.Module, criterion: nn.Module) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, target in loader:
            images, target = images.cuda(non_blocking=True), target.cuda(non_blocking=True)
            output = model(images)
            criterion(output, target)
            correct += (output.argmax(1) == target).sum().item()
            total += target.size(0)
    return correct / max(total, 1)


def main() -> None:
    args = parser.parse_args()
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 100))
    model.cuda()
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
    train_loader = DataLoader(Images(50000), batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(Images(10000), batch_size=args.batch_size)
    for epoch in range(args.epochs):
        start = time.time()
        model.train()
        for step, (images, labels) in enumerate(train_loader):
            images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"Training Epoch: {epoch + 1} [{step * args.batch_size + len(images)}/50000]\tLoss: {loss:0.4f}")
        print(f"epoch {epoch} training time consumed: {time.time() - start:.2f}s")
        accuracy = validate(test_loader, model, criterion)
        print(f"epoch {epoch} accuracy {accuracy:.3f}")
        torch.save(model.state_dict(), "checkpoint.pth")


if __name__ == "__main__":
    main()
