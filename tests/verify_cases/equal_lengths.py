"""PFL102's pitfall, but with data whose chunks have equal longest sequences: the gather succeeds."""

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(3, 5, batch_first=True)

    def forward(self, padded, lengths):
        output, _ = self.rnn(pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False))
        return pad_packed_sequence(output, batch_first=True)[0]  # expect: PFL102


def pitfall_lint_example():
    return Tagger(), (torch.randn(4, 7, 3), torch.tensor([7, 3, 7, 2]))
