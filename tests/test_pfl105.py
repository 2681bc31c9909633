"""PFL105 dp-scalar-or-non-tensor-output: forward outputs that nn.DataParallel's gather cannot handle as returned."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.functional import cross_entropy as xent
"""
WRAP = """
model = nn.DataParallel(Net())
"""

CASES = {
    "mean-of-the-loss": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 2)
            def forward(self, x, y):
                return (self.lin(x) - y).pow(2).mean()  # expect: PFL105
    """,
    "loss-in-a-tuple-through-a-variable": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 2)
            def forward(self, x, labels=None):
                logits = self.lin(x)
                loss = None
                if labels is not None:
                    loss = F.cross_entropy(logits, labels)
                return logits, loss  # expect: PFL105
    """,
    "criterion-module-and-alias": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 2)
                self.criterion = nn.CrossEntropyLoss()
            def forward(self, x, y):
                logits = self.lin(x)
                if self.training:
                    return {"loss": self.criterion(logits, y), "logits": logits}  # expect: PFL105
                return {"loss": xent(logits, y) * 0.5, "logits": logits}  # expect: PFL105
    """,
    "python-numbers": """
        class Net(nn.Module):
            def forward(self, x):
                if x.numel() == 0:
                    return 0  # expect: PFL105
                accuracy = (x > 0).float().mean().item()
                return x, accuracy  # expect: PFL105
    """,
    "strings": """
        class Net(nn.Module):
            def forward(self, x):
                return {"out": x, "tag": f"batch of {len(x)}"}  # expect: PFL105
    """,
    "reductions-with-a-dimension-are-fine": """
        class Net(nn.Module):
            def forward(self, x):
                per_sample = F.cross_entropy(x, x.argmax(1), reduction="none")
                return x.mean(dim=1), x.sum(1), torch.mean(x, dim=0), per_sample, torch.logsumexp(x, 1)
    """,
    "a-tensor-divided-by-a-scalar-keeps-its-batch": """
        class Net(nn.Module):
            def forward(self, x):
                y = x * 2
                return x / x.norm(p=2), x + torch.max(x), y - y.mean()
    """,
    "a-loss-scaled-by-a-setting-or-a-count": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.commitment = 0.25
            def forward(self, x, target, mask):
                if self.training:
                    return F.mse_loss(x, target) * self.commitment  # expect: PFL105
                num_masked = mask.sum()
                return F.l1_loss(x, target) / num_masked  # expect: PFL105
    """,
    "a-value-accumulated-in-a-loop-is-not-told": """
        class Net(nn.Module):
            def forward(self, xs):
                total = 0
                for x in xs:
                    total += x.pow(2)
                for x in xs:
                    last = x.mean()
                for last in xs:
                    pass
                return total, last
    """,
    "none-and-tensors-are-fine": """
        class Net(nn.Module):
            def forward(self, x):
                if x is None:
                    return None
                return x * 2, [x, x], {"a": x}
    """,
    "reduction-none-criterion-is-fine": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = nn.MSELoss(reduction="none")
            def forward(self, x, y):
                return self.criterion(x, y)
    """,
    "nested-function-returns-are-not-forwards": """
        class Net(nn.Module):
            def forward(self, x):
                def score(v):
                    return v.mean().item()
                self.last = score
                return x
    """,
    "other-methods-are-not-gathered": """
        class Net(nn.Module):
            def forward(self, x):
                return x
            def loss(self, x):
                return x.mean()
    """,
    "a-submodule-returning-a-scalar-is-not-gathered": """
        class Criterion(nn.Module):
            def forward(self, x, y):
                return F.mse_loss(x, y)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.loss = Criterion()
            def forward(self, x, y):
                out = self.lin(x)
                return out, self.loss(out, y).unsqueeze(0)
    """,
}

DDP_ONLY = """
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
class Net(nn.Module):
    def forward(self, x):
        return x.mean()
def main():
    dist.init_process_group("gloo")
    return DDP(Net())
"""


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(HEAD) + dedent(CASES[name]) + dedent(WRAP))


def test_a_ddp_only_project_gets_no_finding() -> None:
    assert_marks(dedent(HEAD) + dedent(DDP_ONLY))
