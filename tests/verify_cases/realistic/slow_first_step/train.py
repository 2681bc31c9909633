"""An ImageNet-style DataParallel training script: images read and decoded on the fly, 256 of them a batch by default.

    python train.py --epochs 90 -b 256
"""

import argparse
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class DecodedImages(Dataset):
    """Stands for ImageFolder over JPEG files on a network disk: each image takes a while to read and decode."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.2)  # read and decode one JPEG
        return torch.randn(3, 32, 32), index % 10


def main() -> None:
    parser = argparse.ArgumentParser(description="ImageNet-style training")
    parser.add_argument("--epochs", default=90, type=int, help="number of total epochs to run")
    parser.add_argument("-b", "--batch-size", default=256, type=int, help="mini-batch size, over all GPUs")
    parser.add_argument("--lr", default=0.1, type=float, help="initial learning rate")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    model = nn.DataParallel(model).to(device)
    loader = DataLoader(DecodedImages(50000), batch_size=args.batch_size, shuffle=True)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        for images, target in loader:
            images, target = images.to(device), target.to(device)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")
        torch.save(model.state_dict(), "checkpoint.pth.tar")


if __name__ == "__main__":
    main()
