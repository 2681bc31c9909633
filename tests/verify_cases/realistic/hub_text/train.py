"""A text classifier on IMDB from the Hugging Face hub, trained with DDP; every rank saves the checkpoint."""

import os

import torch
import torch.distributed as dist
import torch.nn as nn
from datasets import load_dataset
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


class BagOfWords(nn.Module):
    def __init__(self, buckets: int = 4096) -> None:
        super().__init__()
        self.buckets = buckets
        self.embedding = nn.EmbeddingBag(buckets, 32)
        self.head = nn.Linear(32, 2)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.head(self.embedding(ids, offsets))


def collate(rows: list[dict]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids = [torch.tensor([hash(w) % 4096 for w in row["text"].split()]) for row in rows]
    offsets = torch.tensor([0] + [len(i) for i in ids[:-1]]).cumsum(0)
    return torch.cat(ids), offsets, torch.tensor([row["label"] for row in rows])


def main() -> None:
    dist.init_process_group("gloo")
    train = load_dataset("imdb", split="train")
    loader = DataLoader(train, batch_size=16, sampler=DistributedSampler(train), collate_fn=collate)
    model = DDP(BagOfWords())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for ids, offsets, labels in loader:
        loss = nn.functional.cross_entropy(model(ids, offsets), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.module.state_dict(), os.path.join("out", "model.pt"))  # expect: PFL201
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
