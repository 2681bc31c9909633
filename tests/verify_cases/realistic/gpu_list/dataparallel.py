"""ImageNet-style training with nn.DataParallel over the GPUs listed in main(), handed to the worker by name."""

import argparse

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    gpus = [0, 1, 2, 3]
    main_worker(gpus=gpus, args=args)


def main_worker(gpus: list[int], args: argparse.Namespace) -> None:
    torch.cuda.set_device("cuda:{}".format(gpus[0]))
    model = Net().cuda()
    model = nn.DataParallel(model, device_ids=gpus, output_device=gpus[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        for step in range(3):
            images = torch.randn(args.batch_size, 3, 16, 16).cuda(non_blocking=True)
            target = torch.randint(0, 10, (args.batch_size,)).cuda(non_blocking=True)
            loss = nn.functional.cross_entropy(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "checkpoint.pth")


if __name__ == "__main__":
    main()
