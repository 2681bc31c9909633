"""PFL211 reentrant-checkpoint-with-ddp: reentrant activation checkpointing in a module DDP runs, where it breaks:
with find_unused_parameters (a crash), or for a module checkpointed twice (a silent desync)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

MODEL = """
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint, checkpoint_sequential
import torch.utils.checkpoint as cp


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.shared = nn.Linear(4, 4)
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))

    def forward(self, x):
{body}
        return self.seq(x) + self.shared(x) + sum(block(x) for block in self.blocks)


def main():
    dist.init_process_group("gloo")
    model = DDP(Net(){options})
"""


def source(body: str, options: str = "") -> str:
    return MODEL.format(body=dedent(body).strip("\n").replace("\n", "\n        ").join(["        ", ""]), options=options)


FIND_UNUSED = ", find_unused_parameters=True"
CASES = {
    "absent-with-find-unused": ("""
        for block in self.blocks:
            x = checkpoint(block, x)  # expect: PFL211
    """, FIND_UNUSED),
    "explicit-true-with-find-unused": ("""
        x = cp.checkpoint(self.shared, x, use_reentrant=True)  # expect: PFL211
        x = checkpoint_sequential(self.seq, 2, x)  # expect: PFL211
    """, FIND_UNUSED),
    "same-module-in-a-loop": ("""
        for _ in range(2):
            x = checkpoint(self.shared, x, use_reentrant=True)  # expect: PFL211
    """, ""),
    "same-module-twice": ("""
        x = checkpoint(self.shared, x)
        x = checkpoint(self.shared, x)  # expect: PFL211
    """, ""),
    # Fine.
    "non-reentrant": ("""
        for _ in range(2):
            x = checkpoint(self.shared, x, use_reentrant=False)
    """, FIND_UNUSED),
    "each-block-once-without-find-unused": ("""
        for block in self.blocks:
            x = checkpoint(block, x)
    """, ""),
    "static-graph": ("""
        for _ in range(2):
            x = checkpoint(self.shared, x)
    """, FIND_UNUSED + ", static_graph=True"),
    "decided-at-run-time": ("""
        x = checkpoint(self.shared, x, use_reentrant=self.training)
    """, FIND_UNUSED),
    "find-unused-off": ("""
        x = checkpoint(self.shared, x)
    """, ", find_unused_parameters=False"),
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    body, options = CASES[name]
    assert_marks(source(body, options))


def test_a_module_no_ddp_runs() -> None:
    text = source("x = checkpoint(self.shared, x)", FIND_UNUSED).replace("model = DDP(Net(), find_unused_parameters=True)", "model = Net()")
    assert_marks(text)


def test_the_message_says_what_torch_does_without_the_argument() -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    text = source("x = checkpoint(self.shared, x)", FIND_UNUSED)
    (diagnostic,) = Engine(all_rules()).check_source("example.py", text.encode()).diagnostics
    assert diagnostic.message.startswith(
        "`checkpoint` without `use_reentrant` (torch 2.13 warns, then uses the reentrant variant) in a module that "
        "DistributedDataParallel runs (wrapped at line 24): with `find_unused_parameters=True`"
    )
