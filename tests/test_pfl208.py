"""PFL208 ddp-module-bypass: a forward around the DDP wrapper whose loss is backpropagated; evaluation through
`.module` is fine."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks, expected, reported

SETUP = """
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
"""

CASES = {
    "module-call-then-loss-then-backward": """
        def train(net, batches, criterion):
            ddp = DDP(net)
            for x, y in batches:
                out = ddp.module(x)  # expect: PFL208
                loss = criterion(out, y)
                loss.backward()
    """,
    "module-forward-in-one-expression": """
        def train(net, x):
            ddp = DDP(net)
            ddp.module.forward(x).sum().backward()  # expect: PFL208
    """,
    "the-bare-model-a-ddp-wraps": """
        def train(model, x, y, criterion):
            ddp_model = DDP(model, device_ids=None)
            loss = criterion(model(x), y)  # expect: PFL208
            loss.backward()
    """,
    "through-a-scaler-and-an-augmented-loss": """
        def train(net, x, scaler):
            ddp = DDP(net)
            loss = 0
            loss += ddp.module(x).mean()  # expect: PFL208
            scaler.scale(loss).backward()
    """,
    "accelerator-backward": """
        def train(net, x, accelerator):
            ddp = DDP(net)
            loss = ddp.module(x).mean()  # expect: PFL208
            accelerator.backward(loss)
    """,
    "module-call-after-the-wrapper-is-rebound": """
        def train(net, x, rank):
            ddp = DDP(net.to(rank), device_ids=[rank])
            ddp = ddp.train()
            ddp.module(x).sum().backward()  # expect: PFL208
    """,
    "module-call-at-module-level-after-a-chained-wrap": """
        net = nn.Linear(4, 4)
        ddp = DDP(net).train()
        ddp = ddp.float()
        ddp.module(torch.ones(2, 4)).sum().backward()  # expect: PFL208
    """,
    "the-rebound-wrapper-called-itself": """
        def train(net, x, rank):
            ddp = DDP(net.to(rank), device_ids=[rank])
            ddp = ddp.train()
            ddp(x).sum().backward()
    """,
    # Fine: nothing of it is backpropagated, or it goes through the wrapper.
    "evaluation-under-no-grad": """
        def evaluate(net, x):
            ddp = DDP(net)
            with torch.no_grad():
                loss = ddp.module(x).mean()
            loss.backward()
    """,
    "inference-mode-decorator": """
        @torch.inference_mode()
        def evaluate(net, x):
            ddp = DDP(net)
            return ddp.module(x)
    """,
    "output-never-backpropagated": """
        def train(net, x):
            ddp = DDP(net)
            loss = ddp(x).mean()
            loss.backward()
            preview = ddp.module(x)
            print(preview.argmax())
    """,
    "detached-for-the-discriminator": """
        def train(generator, discriminator, z, criterion):
            g = DDP(generator)
            fake = g.module(z)
            d_loss = criterion(discriminator(fake.detach()))
            d_loss.backward()
    """,
    "rebound-to-the-wrapper": """
        def train(model, x):
            model = DDP(model)
            model(x).sum().backward()
    """,
    "inside-no-sync": """
        def train(net, x):
            ddp = DDP(net)
            with ddp.no_sync():
                ddp.module(x).sum().backward()
    """,
    "a-data-parallel-wrapper": """
        def train(net, x):
            dp = nn.DataParallel(net)
            dp.module(x).sum().backward()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))


# A test that backpropagates around the wrapper to compare gradients, and never steps: nothing drifts.
GRADIENT_TEST = """
def test_gradients_are_not_synced(net, batches):
    ddp = DDP(net)
    for x in batches:
        loss = ddp.module(x).sum(){mark}
        loss.backward()
{update}
"""
UPDATES = {
    "only-reads-the-gradients": "",
    "optimizer-step": "        optimizer.step()\n",
    "scaler-step": "        scaler.step(optimizer)\n",
    "in-place-update": "        for p in net.parameters():\n            p.data.sub_(0.1 * p.grad)\n",
    "subtracting-the-gradient": "        for p in net.parameters():\n            p -= 0.1 * p.grad\n",
}


@pytest.mark.parametrize("update", UPDATES)
@pytest.mark.parametrize("path", ["tests/test_ddp.py", "test_ddp.py", "ddp_test.py", "train.py"])
def test_a_test_that_never_updates_parameters_is_left_alone(update: str, path: str) -> None:
    """In a test file, a bypass whose gradients are only read is on purpose; a step or an in-place update, or the
    same code outside a test suite, is the pitfall."""
    flagged = bool(UPDATES[update]) or path == "train.py"
    source = SETUP + GRADIENT_TEST.replace("{mark}", "  # expect: PFL208" if flagged else "").replace("{update}", UPDATES[update])
    assert {f for f in reported(source, path) if f[0] == "PFL208"} == expected(source)  # a step without zero_grad is PFL503's
