"""PFL101 bound-method-on-module: every storage form, and the classes it must leave alone."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

CASES = {
    "forward-rebound-in-init": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.forward = self.fast  # expect: PFL101
            def fast(self, x):
                return x
    """,
    "stored-callable-called-later": """
        from torch import nn as tnn
        class Gauss(tnn.Module):
            def __init__(self, kind):
                super().__init__()
                self.operation_function = self._gaussian  # expect: PFL101
            def _gaussian(self, x):
                return x
            def forward(self, x):
                return self.operation_function(x)
    """,
    "submodule-forward": """
        import torch
        class Wrapper(torch.nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model
                self.forward = self.model.forward  # expect: PFL101
    """,
    "setattr": """
        import torch.nn as nn
        class Net(nn.Module):
            def configure(self, name):
                setattr(self, "forward", self.alt)  # expect: PFL101
            def alt(self, x):
                return x
    """,
    "conditional-expression-in-other-method": """
        import torch.nn as nn
        class Net(nn.Module):
            def set_mode(self, train):
                self.step_fn = self.train_step if train else self.eval_step  # expect: PFL101
            def train_step(self, x):
                return x
            def eval_step(self, x):
                return x
    """,
    "partial-and-method-type-and-lambda": """
        import functools
        import types
        from functools import partial
        import torch.nn as nn
        def helper(module, x):
            return x
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = functools.partial(self.impl, scale=2)  # expect: PFL101
                self.b = partial(helper, self)  # expect: PFL101
                self.c = types.MethodType(helper, self)  # expect: PFL101
                self.d = lambda x: self.impl(x)  # expect: PFL101
                self.e: object = [self.impl]  # expect: PFL101
            def impl(self, x, scale=1):
                return x
    """,
    "base-class-in-same-file": """
        import torch.nn as nn
        class Base(nn.Module):
            def project(self, x):
                return x
        class Child(Base):
            def __init__(self):
                super().__init__()
                self.fn = self.project  # expect: PFL101
    """,
    "lightning-module": """
        import lightning.pytorch as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.forward = self.predict  # expect: PFL101
            def predict(self, x):
                return x
    """,
    # What must not be flagged.
    "not-a-module": """
        class Runner:
            def __init__(self):
                self.forward = self.fast
            def fast(self, x):
                return x
    """,
    "local-class-named-Module-is-not-torch": """
        class Module:
            pass
        class Net(Module):
            def __init__(self):
                self.forward = self.fast
            def fast(self):
                pass
    """,
    "static-class-and-property-values": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = self.helper
                self.b = self.build
                self.c = self.size
                self.act = self.block.act
                self.weight_view = self.linear.weight
                self.name = "forward"
                self.f = lambda self, x: x
            @staticmethod
            def helper(x):
                return x
            @classmethod
            def build(cls):
                return cls()
            @property
            def size(self):
                return 3
    """,
    "class-level-alias-is-fine": """
        import torch.nn as nn
        class Net(nn.Module):
            def fast(self, x):
                return x
            forward = fast
    """,
    "parameter-is-not-a-module-base": """
        import torch.nn as nn
        class P(nn.Parameter):
            def __init__(self):
                self.f = self.g
            def g(self):
                pass
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(CASES[name]))
