"""PFL502 softmax-before-cross-entropy: every spelling of the losses and of softmax, through local variables,
and the neighbours that are right (log_softmax, soft targets, log of probabilities) or unknowable."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

SETUP = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

CASES = {
    "functional-both": """
        def loss(logits, y):
            return F.cross_entropy(F.softmax(logits, dim=1), y)  # expect: PFL502
    """,
    "full-paths-and-torch-softmax": """
        def loss(logits, y):
            a = torch.nn.functional.cross_entropy(torch.softmax(logits, 1), y)  # expect: PFL502
            b = F.cross_entropy(torch.special.softmax(logits, 1), y)  # expect: PFL502
            return a + b
    """,
    "imported-names-and-aliases": """
        from torch.nn.functional import cross_entropy as ce, softmax
        def loss(logits, y):
            return ce(softmax(logits, -1), y)  # expect: PFL502
    """,
    "tensor-method": """
        def loss(out, y):
            return F.cross_entropy(out.logits.softmax(dim=-1), y)  # expect: PFL502
    """,
    "input-keyword": """
        def loss(logits, y):
            return F.cross_entropy(target=y, input=logits.softmax(1))  # expect: PFL502
    """,
    "local-variable-and-local-criterion": """
        def train_step(model, x, y):
            criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
            outputs = model(x)
            probs = F.softmax(outputs, dim=1)
            return criterion(probs, y)  # expect: PFL502
    """,
    "module-level-criterion-and-reshape": """
        criterion = nn.CrossEntropyLoss()
        def train_step(logits, y):
            probs = logits.softmax(-1)
            return criterion(probs.view(-1, probs.size(-1)), y.view(-1))  # expect: PFL502
    """,
    "loss-module-called-directly": """
        def train_step(logits, y, mask):
            probs = torch.softmax(logits, dim=1)
            return nn.CrossEntropyLoss()(probs[mask], y[mask])  # expect: PFL502
    """,
    "softmax-module-and-self-criterion": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
                self.softmax = nn.Softmax(dim=1)
                self.loss_fn = nn.CrossEntropyLoss()
            def training_step(self, x, y):
                return self.loss_fn(self.softmax(self.fc(x)), y)  # expect: PFL502
    """,
    "softmax-module-built-inline": """
        def loss(logits, y):
            return F.cross_entropy(nn.Softmax(dim=-1)(logits), y)  # expect: PFL502
    """,
    "assigned-in-a-with-block": """
        def train_step(model, x, y):
            with torch.autocast("cpu"):
                probs = model(x).softmax(1)
            return F.cross_entropy(probs.float(), y)  # expect: PFL502
    """,
    "nll-loss-on-probabilities": """
        def loss(logits, y):
            nll = nn.NLLLoss()
            probs = F.softmax(logits, dim=1)
            return F.nll_loss(probs, y) + nll(probs, y)  # expect: PFL502
    """,
    # Left alone.
    "logits": """
        def loss(logits, y):
            return F.cross_entropy(logits, y)
    """,
    "log-softmax-into-cross-entropy-is-a-no-op": """
        def loss(logits, y):
            return F.cross_entropy(F.log_softmax(logits, dim=1), y) + F.cross_entropy(logits.log_softmax(1), y)
    """,
    "nll-loss-on-log-probabilities": """
        def loss(logits, y):
            return F.nll_loss(F.log_softmax(logits, 1), y) + F.nll_loss(torch.log(F.softmax(logits, 1)), y)
    """,
    "softmax-as-soft-targets": """
        def distill(student, teacher, T):
            return F.cross_entropy(student, F.softmax(teacher / T, dim=1))
    """,
    "softmax-assigned-in-one-branch": """
        def loss(logits, y, use_probs):
            out = logits
            if use_probs:
                out = F.softmax(logits, 1)
            return F.cross_entropy(out, y)
    """,
    "reassigned-before-use": """
        def loss(logits, y):
            probs = F.softmax(logits, 1)
            probs = logits
            return F.cross_entropy(probs, y)
    """,
    "softmax-in-another-function": """
        probs = None
        def predict(logits):
            probs = F.softmax(logits, 1)
            return probs
        def loss(probs, y):
            return F.cross_entropy(probs, y)
    """,
    "criterion-is-a-parameter": """
        criterion = nn.CrossEntropyLoss()
        def step(criterion, logits, y):
            return criterion(F.softmax(logits, 1), y)
    """,
    "other-losses": """
        def loss(logits, y):
            kl = nn.KLDivLoss()
            return kl(F.log_softmax(logits, 1), F.softmax(y, 1)) + F.mse_loss(F.softmax(logits, 1), y)
    """,
    "local-and-module-functions-named-softmax": """
        import utils
        def softmax(x):
            return x
        def loss(logits, y):
            return F.cross_entropy(softmax(logits), y) + F.cross_entropy(utils.softmax(logits), y)
    """,
    "method-named-softmax": """
        class Head(nn.Module):
            def softmax(self, x):
                return x * 2
            def loss(self, x, y):
                return F.cross_entropy(self.softmax(x), y)
    """,
    "local-function-named-cross-entropy": """
        def cross_entropy(probs, y):
            return -(probs.log() * y).sum()
        def loss(logits, y):
            return cross_entropy(F.softmax(logits, 1), y)
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))
