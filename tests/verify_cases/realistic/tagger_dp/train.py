"""Part-of-speech tagger: an LSTM over packed sentences, on every GPU through nn.DataParallel. The forward unpacks
with pad_packed_sequence and no total_length, so each replica pads to the longest sentence of its own chunk and
DataParallel cannot gather the chunks back into one batch."""

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Tagger(nn.Module):
    def __init__(self, vocab: int = 200, tags: int = 12, hidden: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden, padding_idx=0)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, _ = self.lstm(packed)
        output, _ = pad_packed_sequence(output, batch_first=True)
        return self.out(output)


def collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    words = pad_sequence([w for w, _ in batch], batch_first=True)
    tags = pad_sequence([t for _, t in batch], batch_first=True, padding_value=-100)
    return words, torch.tensor([len(w) for w, _ in batch]), tags


def main() -> None:
    torch.manual_seed(0)
    lengths = [12, 3, 4, 5, 9, 2, 6, 7] * 4
    corpus = [(torch.randint(1, 200, (n,)), torch.randint(0, 12, (n,))) for n in lengths]
    loader = DataLoader(corpus, batch_size=8, shuffle=False, collate_fn=collate)
    model = nn.DataParallel(Tagger().to(device))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for words, word_lengths, tags in loader:
            words, word_lengths, tags = words.to(device), word_lengths.to(device), tags.to(device)
            scores = model(words, word_lengths)
            loss = nn.functional.cross_entropy(scores.flatten(0, 1), tags.flatten(), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
