"""A network with Python 3.12 generics (PEP 695) that picks its forward pass when built, run under DataParallel."""

import torch
import torch.nn as nn


def first[T](items: list[T]) -> T:
    return items[0]


class DynamicNet[
    T: torch.Tensor,
](nn.Module):
    def __init__(self, mix: bool) -> None:
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        if mix:
            self.forward = self.encode_only  # expect: PFL101

    def encode_only(self, x: T) -> T:
        return self.encoder(x)


if __name__ == "__main__":
    model = nn.DataParallel(DynamicNet(mix=True))
    print(model(first([torch.randn(4, 8)])).shape)
