"""Trains with nn.DataParallel over the four GPUs of the machine it was written for."""

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def main() -> None:
    model = nn.DataParallel(Net().cuda(), device_ids=[0, 1, 2, 3])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        inputs = torch.randn(32, 16).cuda()
        optimizer.zero_grad()
        model(inputs).pow(2).mean().backward()
        optimizer.step()
    print("done")


if __name__ == "__main__":
    main()
