"""Sentence classifier: a GRU over padded token ids, every GPU through nn.DataParallel, at module level. The
lengths come from the collate function as a Python list, which the static check cannot see: every replica gets
them all."""

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader


class Classifier(nn.Module):
    def __init__(self, vocab: int = 100, hidden: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens: torch.Tensor, lengths: list[int]) -> torch.Tensor:
        packed = pack_padded_sequence(self.embed(tokens), lengths, batch_first=True)
        _, hidden = self.rnn(packed)
        return self.head(hidden[-1])


def collate(batch: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, list[int], torch.Tensor]:
    batch = sorted(batch, key=lambda pair: len(pair[0]), reverse=True)  # longest first, as packing wants
    tokens = [sentence for sentence, _ in batch]
    return pad_sequence(tokens, batch_first=True), [len(t) for t in tokens], torch.tensor([label for _, label in batch])


torch.manual_seed(0)
sentences = [(torch.randint(1, 100, (int(n),)), i % 3) for i, n in enumerate(torch.randint(3, 12, (32,)))]
loader = DataLoader(sentences, batch_size=2, collate_fn=collate)
model = nn.DataParallel(Classifier())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for tokens, lengths, labels in loader:
    loss = nn.functional.cross_entropy(model(tokens, lengths), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
