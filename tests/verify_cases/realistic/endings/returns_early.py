"""Returns from main before the code under test, without a word."""

import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.forward = self.project  # expect: PFL101

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def main() -> None:
    model = Net()
    if not isinstance(model, nn.Module) or model.linear.in_features == 4:
        return
    print(nn.DataParallel(model)(torch.randn(8, 4)).shape)


if __name__ == "__main__":
    main()
