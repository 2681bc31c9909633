"""PFL603 unregistered-forward-method: a method other than `forward` called on a `fully_shard` module."""

from __future__ import annotations

import pytest
from fsdp_cases import SPELLINGS, findings, marked, places

MODEL = """
import torch.nn as nn
class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 2)
        self.decoder = nn.Linear(2, 4)
        self.blocks = nn.ModuleList([nn.Linear(2, 2)])
    def forward(self, x):
        return self.decoder(self.encoder(x))
    def encode(self, x):
        return self.encoder(x)
    def generate(self, x):
        return self(x)
    def through_blocks(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_fully_shard(spelling: str) -> None:
    imported, call = SPELLINGS[spelling]
    source = f"{MODEL}{imported}\ndef main(x):\n    model = AutoEncoder()\n    {call}(model)\n    return model.encode(x)\n"
    assert places("PFL603", source) == [("PFL603", "train/fsdp_main.py", 23)]


def test_the_message_names_the_registration() -> None:
    (finding,) = findings("PFL603", MODEL + """
from torch.distributed.fsdp import fully_shard
def main(x):
    model = AutoEncoder()
    fully_shard(model)
    return model.encode(x)
""")
    assert finding.message == (
        "`model.encode()` is not `forward`, and `model` was sharded by `fully_shard` at line 23: FSDP gathers the "
        "parameters only around `forward`, so `encode` reads `self.encoder` still sharded (`RuntimeError: ... got "
        'mixed torch.Tensor and DTensor`); call `register_fsdp_forward_method(model, "encode")` after `fully_shard`'
    )


FLAGGED = {
    "a-class-attribute": MODEL + """
from torch.distributed.fsdp import fully_shard
class Trainer:
    def __init__(self):
        self.model = AutoEncoder()
        fully_shard(self.model)
    def embed(self, x):
        return self.model.encode(x)  # expect: PFL603
""",
    "registered-for-another-module": MODEL + """
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
def main(x, other):
    model = AutoEncoder()
    fully_shard(model)
    register_fsdp_forward_method(other, "encode")
    return model.encode(x)  # expect: PFL603
""",
}


@pytest.mark.parametrize("name", FLAGGED)
def test_flagged(name: str) -> None:
    assert places("PFL603", FLAGGED[name]) == marked("PFL603", FLAGGED[name]) != []


CLEAN = {
    "registered": MODEL + """
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
def main(x):
    model = AutoEncoder()
    fully_shard(model)
    register_fsdp_forward_method(model, "encode")
    return model.encode(x)
""",
    "a-method-that-calls-forward": MODEL + """
from torch.distributed.fsdp import fully_shard
def main(x):
    model = AutoEncoder()
    fully_shard(model)
    return model.generate(x)
""",
    "only-submodules-sharded-on-their-own": MODEL + """
from torch.distributed.fsdp import fully_shard
def main(x):
    model = AutoEncoder()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model.through_blocks(x)
""",
    "module-api": MODEL + """
from torch.distributed.fsdp import fully_shard
def main(x):
    model = AutoEncoder()
    fully_shard(model)
    model.train()
    return model.state_dict()
""",
    "a-class-of-another-file": """
from torch.distributed.fsdp import fully_shard
from models import AutoEncoder
def main(x):
    model = AutoEncoder()
    fully_shard(model)
    return model.encode(x)
""",
    "before-sharding": MODEL + """
from torch.distributed.fsdp import fully_shard
def main(x):
    model = AutoEncoder()
    codes = model.encode(x)
    fully_shard(model)
""",
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean(name: str) -> None:
    assert places("PFL603", CLEAN[name]) == []
