"""Fine-tuning: every argument is required, and no README line gives them."""

import argparse

import torch
import torch.nn as nn

WIDTHS = {"tiny": 16, "small": 32}


class Classifier(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, 4))
        self.updates = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.updates += 1  # expect: PFL104
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
    parser.add_argument("steps", type=int, metavar="STEPS")
    parser.add_argument("--model", choices=["tiny", "small"], required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--gpu", type=int, required=True, help="the GPU to fine-tune on")
    parser.add_argument("--run-name", required=True)
    args = parser.parse_args()
    train(WIDTHS[args.model], args.steps, args.lr)
