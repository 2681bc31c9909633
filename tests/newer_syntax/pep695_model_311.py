"""A network with Python 3.12 generics (PEP 695) that picks its forward pass when built, run under DataParallel."""

import torch
import torch.nn as nn


def first(items: list) -> object:
    return items[0]


class DynamicNet(

    nn.Module):
    def __init__(self, mix: bool) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        if mix:
            self.forward = self.encode_only  # expect: PFL101

    def encode_only(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


if __name__ == "__main__":
    model = nn.DataParallel(DynamicNet(mix=True))
    print(model(first([torch.randn(4, 8)])).shape)
