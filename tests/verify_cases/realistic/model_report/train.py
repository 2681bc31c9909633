"""Builds the model for every GPU and reports its size before the long job is queued: the model is wrapped in
nn.DataParallel and never called."""

import argparse

import torch
import torch.nn as nn


class GaussianSmoother(nn.Module):
    def __init__(self, channels: int, width: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(channels, width)
        self.out = nn.Linear(width, channels)
        self.op = self._gaussian  # expect: PFL101

    def _gaussian(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.exp(-self.proj(x) ** 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", type=int, default=8)
    args = parser.parse_args()
    model = GaussianSmoother(8, width=32)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    parameters = sum(p.numel() for p in model.parameters())
    print(f"{type(model).__name__} with {parameters} parameters on {torch.cuda.device_count()} GPUs")


if __name__ == "__main__":
    main()
