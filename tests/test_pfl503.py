"""PFL503 missing-zero-grad: loops that step without zeroing, every way of zeroing (in the loop, in a helper,
in a closure), gradient accumulation, and the loops that are no training loops."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

SETUP = """
import torch
import torch.nn as nn
"""

CASES = {
    "distributed-autograd-context": """
        import torch.distributed.autograd as dist_autograd
        def train(pipe, x, opt, criterion):
            for _ in range(2):
                with dist_autograd.context() as context_id:
                    loss = criterion(pipe(x), x)
                    loss.backward(context_id)
                    opt.step(context_id)
    """,
    "deepspeed-engine-zeroes-in-its-step": """
        import deepspeed
        def train(model, loader, optimizer):
            engine = deepspeed.initialize(model=model, optimizer=optimizer)[0]
            for x, y in loader:
                loss = engine(x).sub(y).pow(2).mean()
                engine.backward(loss)
                engine.step()
    """,
    "for-loop": """
        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x).sub(y).pow(2).mean()
                loss.backward()
                optimizer.step()  # expect: PFL503
    """,
    "while-loop-at-module-level": """
        model = nn.Linear(2, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        i = 0
        while i < 10:
            model(torch.randn(4, 2)).sum().backward()
            opt.step()  # expect: PFL503
            i += 1
    """,
    "optimizer-by-construction-not-by-name": """
        from torch.optim import Adam
        def train(model, batches):
            o = Adam(model.parameters())
            for b in batches:
                model(b).sum().backward()
                o.step()  # expect: PFL503
    """,
    "optimizer-fetched-before-the-loop": """
        class Model:
            def fit(self, batches):
                o = self.optimizers()
                for b in batches:
                    self.manual_backward(self.model(b).sum())
                    o.step()  # expect: PFL503
    """,
    "zeroed-only-before-the-loop": """
        def train(model, loader, optimizer):
            optimizer.zero_grad()
            for x in loader:
                model(x).sum().backward()
                optimizer.step()  # expect: PFL503
    """,
    "zeroed-per-epoch-but-stepped-per-batch": """
        def train(model, loader, optimizer, epochs):
            for epoch in range(epochs):
                optimizer.zero_grad()
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()  # expect: PFL503
    """,
    "accumulation-that-never-resets": """
        def train(model, loader, optimizer, accum):
            for i, x in enumerate(loader):
                (model(x).sum() / accum).backward()
                if (i + 1) % accum == 0:
                    optimizer.step()  # expect: PFL503
    """,
    "grad-scaler-and-self-optimizer": """
        class Trainer:
            def fit(self, loader):
                for x in loader:
                    with torch.autocast("cuda"):
                        loss = self.model(x).sum()
                    self.scaler.scale(loss).backward()
                    self.scaler.step(self.optimizer)  # expect: PFL503
                    self.scaler.update()
    """,
    "accelerator-backward": """
        def train(accelerator, model, loader, optimizer):
            for x in loader:
                with accelerator.accumulate(model):
                    accelerator.backward(model(x).sum())
                    optimizer.step()  # expect: PFL503
    """,
    # Zeroed.
    "zero-grad-in-the-loop": """
        def train(model, loader, optimizer, scheduler):
            for x in loader:
                optimizer.zero_grad(set_to_none=True)
                model(x).sum().backward()
                optimizer.step()
                scheduler.step()
    """,
    "model-zero-grad-after-step": """
        def train(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                model.zero_grad()
    """,
    "grads-set-to-none-or-zeroed-by-hand": """
        def train(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                for p in model.parameters():
                    p.grad = None
        def train2(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.data.zero_()
    """,
    "accumulation-that-resets-after-the-step": """
        def train(model, loader, optimizer, gradient_accumulation_steps):
            for step, x in enumerate(loader):
                (model(x).sum() / gradient_accumulation_steps).backward()
                if (step + 1) % gradient_accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """,
    "accumulation-over-an-inner-loop": """
        def train(model, batches, optimizer, micro_steps):
            for batch in batches:
                for micro in range(micro_steps):
                    model(batch[micro]).sum().backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    """,
    "zeroed-in-a-helper-of-the-file": """
        def reset(opt):
            opt.zero_grad()
        class Trainer:
            def clear(self):
                reset(self.optimizer)
            def fit(self, loader):
                for x in loader:
                    self.model(x).sum().backward()
                    self.optimizer.step()
                    self.clear()
    """,
    "closure-with-lbfgs": """
        def train(model, x, steps):
            optimizer = torch.optim.LBFGS(model.parameters())
            def closure():
                optimizer.zero_grad()
                loss = model(x).sum()
                loss.backward()
                return loss
            for _ in range(steps):
                optimizer.step(closure)
    """,
    "distributed-autograd": """
        import torch.distributed.autograd as dist_autograd
        from torch.distributed.optim import DistributedOptimizer
        def train(model, loader, params):
            opt = DistributedOptimizer(torch.optim.SGD, params, lr=0.05)
            for x in loader:
                with dist_autograd.context() as context_id:
                    dist_autograd.backward(context_id, [model(x).sum()])
                    opt.step(context_id)
    """,
    "fresh-optimizer-each-iteration": """
        def search(make_model, x, rates):
            for lr in rates:
                model = make_model()
                optimizer = torch.optim.SGD(model.parameters(), lr=lr)
                model(x).sum().backward()
                optimizer.step()
    """,
    # No training loop.
    "scheduler-and-environment-steps": """
        def run(model, env, loader, lr_scheduler, optimizer_scheduler):
            for x in loader:
                model(x).sum().backward()
                lr_scheduler.step()
                optimizer_scheduler.step()
                env.step(0)
    """,
    "evaluation-loop": """
        def evaluate(model, loader, optimizer):
            for x in loader:
                with torch.no_grad():
                    model(x)
            optimizer.step()
    """,
    "autograd-grad-does-not-accumulate": """
        def train(model, loader, optimizer):
            for x in loader:
                grads = torch.autograd.grad(model(x).sum(), list(model.parameters()))
                for p, g in zip(model.parameters(), grads):
                    p.grad = g
                optimizer.step()
    """,
    "step-once-after-the-loop": """
        def train(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
            else:
                optimizer.step()
            optimizer.step()
    """,
    "step-in-a-nested-function": """
        def train(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                def later():
                    optimizer.step()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))


def test_nested_training_loops_are_reported_once() -> None:
    assert_marks(SETUP + dedent("""
        def train(model, loader, optimizer, epochs):
            for epoch in range(epochs):
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()  # expect: PFL503
    """))
