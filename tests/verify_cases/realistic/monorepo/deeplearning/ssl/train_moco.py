"""Pre-training, as a repository of several methods has it: the script imports its method from the repository's
own package, which is importable from the repository's root.

    cd <repository> && PYTHONPATH=. python deeplearning/ssl/train_moco.py
"""

import torch
import torch.nn as nn

from deeplearning.ssl.moco.builder import MoCo


class Pretrainer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.method = MoCo()
        self.seen = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen += x.shape[0]  # expect: PFL104
        features = self.method(x)
        return (features @ features.T).mean()


def main() -> None:
    model = Pretrainer()
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03)
    for _ in range(5):
        loss = model(torch.randn(32, 32, device=device)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
