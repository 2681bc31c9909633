"""PFL104 dp-state-mutation-in-forward: state that outlives a forward call, set on a DataParallel replica."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""
WRAP = """
model = nn.DataParallel(Net())
"""

CASES = {
    "counter": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.calls = 0
            def forward(self, x):
                self.calls += 1  # expect: PFL104
                return self.lin(x)
    """,
    "counter-spelled-out-in-a-helper": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.step = 0
            def forward(self, x):
                self._tick()
                return x
            def _tick(self):
                self.step = self.step + 1  # expect: PFL104
    """,
    "value-another-method-reads": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(4, 1)
                self.last_weights = None
            def forward(self, x):
                out, weights = self.attn(x, x, x)
                self.last_weights = weights  # expect: PFL104
                return out
            def attention_map(self):
                return self.last_weights
    """,
    "state-carried-to-the-next-call": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(4, 4)
                self.hidden = None
            def forward(self, x):
                out, h = self.rnn(x, self.hidden)
                self.hidden = h.detach()  # expect: PFL104
                return out
    """,
    "tuple-target-and-annotated": """
        class Net(nn.Module):
            def forward(self, x):
                self.seen: int = self.seen + 1  # expect: PFL104
                self.lo, self.hi = x.min(), x.max()  # expect: PFL104, PFL104
                return x
            def stats(self):
                return self.lo, self.hi
    """,
    "buffer-replaced-not-updated": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("ema", torch.zeros(4))
            def forward(self, x):
                self.ema = 0.9 * self.ema + 0.1 * x.mean(0)  # expect: PFL104
                return x - self.ema
    """,
    "in-place-buffer-updates-are-fine": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("count", torch.zeros((), dtype=torch.long))
                self.register_buffer("running", torch.zeros(4))
                self.total = torch.zeros(())
            def forward(self, x):
                self.count += 1
                self.total += x.sum()
                self.running.mul_(0.9).add_(x.mean(0), alpha=0.1)
                self.running.copy_(self.running)
                return x
    """,
    "shared-containers-are-mutated-not-rebound": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.cache = {}
                self.history = []
            def forward(self, x):
                self.cache["last"] = x
                self.history.append(x.shape)
                return x
            def last(self):
                return self.cache["last"], self.history
    """,
    "value-used-only-within-the-call": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
            def forward(self, x):
                self.features = self.lin(x)
                return self._head()
            def _head(self):
                return self.features.relu()
    """,
    "lazily-built-caches-are-rebuilt": """
        class Rotary(nn.Module):
            def __init__(self):
                super().__init__()
                self.cached_len = 0
                self.table = None
            def forward(self, x):
                if x.size(0) > self.cached_len:
                    self._build(x.size(0))
                if self.table is None or self.table.size(0) < 2:
                    self.table = torch.ones(2)
                return x * self.cos[: x.size(0)]
            def _build(self, n):
                self.cached_len = n
                self.register_buffer("cos", torch.ones(n), persistent=False)
            def describe(self):
                return self.cached_len
        model = nn.DataParallel(Rotary())
    """,
    "parameters-submodules-and-properties-are-not-plain": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(()))
            @property
            def mode(self):
                return self._mode
            @mode.setter
            def mode(self, value):
                self._mode = value
            def forward(self, x):
                self.proj = nn.Linear(4, 4)
                self.scale = nn.Parameter(self.scale * 2)
                self.mode = "eval"
                return self.proj(x) * self.scale
            def report(self):
                return self.proj, self.scale, self.mode
    """,
    "set-up-methods-are-not-readers": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.out = None
                print(self.out)
            def forward(self, x):
                self.out = x
                return x * 2
    """,
    "state-set-earlier-in-the-same-call": """
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(4, 4)
            def forward(self, x):
                self._start(x)
                outputs = [self._step(x[t]) for t in range(x.size(0))]
                self.steps = 0
                for t in range(3):
                    self.steps = self.steps + 1
                return torch.stack(outputs)
            def _start(self, x):
                self.hidden = x.new_zeros(x.size(1), 4)
            def _step(self, x):
                self.hidden = self.cell(x, self.hidden)
                return self.hidden
        model = nn.DataParallel(Decoder())
    """,
    "state-reset-only-sometimes-is-still-carried": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = None
            def forward(self, x):
                if x.sum() > 0:
                    self.scale = None
                self.scale = quantize(x, self.scale)  # expect: PFL104
                return x * self.scale
    """,
    "conversions-and-early-return-caches": """
        class Positions(nn.Module):
            def __init__(self):
                super().__init__()
                self.pe = None
                self.mask = torch.zeros(0)
            def extend(self, x):
                if self.pe is not None:
                    if self.pe.size(0) >= x.size(0):
                        return
                self.pe = torch.arange(x.size(0))
            def forward(self, x):
                self.extend(x)
                self.mask = self.mask.to(x.device)
                return x + self.pe
            def table(self):
                return self.pe, self.mask
        model = nn.DataParallel(Positions())
    """,
    "cache-cleared-in-the-other-branch": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.src_mask = None
            def forward(self, src, has_mask=True):
                if has_mask:
                    if self.src_mask is None or self.src_mask.size(0) != len(src):
                        self.src_mask = torch.ones(len(src))
                else:
                    self.src_mask = None
                return src
    """,
    "nested-function-in-forward-is-not-forward": """
        class Net(nn.Module):
            def forward(self, x):
                def hook(grad):
                    self.grad_seen += 1
                    return grad
                x.register_hook(hook)
                return x
    """,
}

# A project that trains only with DDP never runs its modules under nn.DataParallel.
DDP_ONLY = """
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
    def forward(self, x):
        self.calls += 1
        return x
def main():
    dist.init_process_group("gloo")
    return DDP(Net())
"""


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    source = dedent(CASES[name])
    assert_marks(dedent(HEAD) + source + ("" if "DataParallel(" in source else dedent(WRAP)))


def test_a_ddp_only_project_gets_no_finding() -> None:
    assert_marks(dedent(HEAD) + dedent(DDP_ONLY))


def test_only_where_a_wrap_of_the_project_names_the_module() -> None:
    """A model library, or a wrap whose model the source cannot tell, is not enough (PFL101 reports there)."""
    counter = dedent(CASES["counter"]).replace("  # expect: PFL104", "")
    assert_marks(dedent(HEAD) + counter)
    assert_marks(dedent(HEAD) + counter + "model = nn.DataParallel(build())\n")
