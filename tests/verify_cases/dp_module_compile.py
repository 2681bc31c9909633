"""PFL106 through `Module.compile()`: the compiled forward, bound to the original, is copied into every replica."""

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


if __name__ == "__main__":
    model = Net()
    model.compile(backend="eager")
    model = nn.DataParallel(model)  # expect: PFL106
    model(torch.randn(4, 4)).sum().backward()
