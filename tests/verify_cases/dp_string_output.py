"""PFL105 with a string in the output: the gather turns it into the text of a map object, silently."""

import torch
import torch.nn as nn


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return {"out": self.lin(x), "tag": "tagged"}  # expect: PFL105


if __name__ == "__main__":
    output = nn.DataParallel(Tagger())(torch.randn(4, 4))
    print(output["tag"])
