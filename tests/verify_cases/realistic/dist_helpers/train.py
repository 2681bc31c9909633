"""Trains a small classifier on every GPU of the node: `torchrun --nproc-per-node 8 train.py`."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from utils.distributed import init_distributed, wrap


def main() -> None:
    local_rank = init_distributed()
    features = torch.linspace(-1, 1, 320).reshape(32, 10)
    labels = (features.sum(dim=1) > 0).long()
    train_loader = DataLoader(TensorDataset(features, labels), batch_size=8, shuffle=True)
    model = wrap(nn.Linear(10, 2), local_rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(inputs.cuda()), targets.cuda()).backward()
            optimizer.step()
    torch.save(model.module.state_dict(), "classifier.pt")


if __name__ == "__main__":
    main()
