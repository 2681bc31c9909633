"""Pre-training: the command line is in the README."""

import argparse
import os

import torch
import torch.nn as nn

WIDTHS = {"tiny": 16, "small": 32}


class Classifier(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 4))
        self.seen = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen += 1  # expect: PFL104
        return self.body(x)


def train(width: int, steps: int, lr: float) -> None:
    model = Classifier(width)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        logits = model(torch.randn(16, 8, device=device))
        loss = nn.functional.cross_entropy(logits, torch.randint(0, 4, (16,), device=device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--model", choices=sorted(WIDTHS), required=True)
    parser.add_argument("--epochs", type=int, default=90)
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    train(WIDTHS[args.model], args.epochs, 0.1)
