"""PFL106 compile-with-data-parallel: every way a compiled module reaches nn.DataParallel, and what is fine."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

NET = """
import torch
import torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x):
        return self.lin(x)
"""

CASES = {
    "direct": """
        model = nn.DataParallel(torch.compile(Net()))  # expect: PFL106
    """,
    "through-a-variable": """
        model = Net()
        model = torch.compile(model, mode="max-autotune")
        model = nn.DataParallel(model)  # expect: PFL106
    """,
    "aliases-and-chained-moves": """
        from torch import compile as tcompile
        from torch.nn import DataParallel as DP
        def main():
            net = tcompile(Net()).cuda()
            return DP(net, device_ids=[0, 1])  # expect: PFL106
    """,
    "compiled-on-one-branch-only": """
        def main(args):
            model = Net()
            model = model.to("cuda")
            if args.torchscript:
                model = torch.jit.script(model)
            elif args.torchcompile:
                model = torch.compile(model)
            if args.num_gpu > 1:
                model = torch.nn.DataParallel(model)  # expect: PFL106
            return model
    """,
    "module-compile-method": """
        def main():
            model = Net()
            model.compile()
            return nn.DataParallel(model)  # expect: PFL106
    """,
    "functional-data-parallel": """
        from torch.nn.parallel import data_parallel
        def step(x):
            model = torch.compile(Net())
            return data_parallel(model, x, device_ids=[0, 1])  # expect: PFL106
    """,
    "compiled-submodule-of-a-wrapped-module": """
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.compile(Net())  # expect: PFL106
            def forward(self, x):
                return self.body(x)
        model = nn.DataParallel(Outer())
    """,
    "module-that-compiles-itself": """
        class Fast(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.compile()  # expect: PFL106
            def forward(self, x):
                return self.lin(x)
        model = nn.DataParallel(Fast())
    """,
    "compile-after-the-wrap-is-not-this-rule": """
        model = torch.compile(nn.DataParallel(Net()))
    """,
    "rebound-after-compile": """
        def main():
            model = torch.compile(Net())
            model = Net()
            return nn.DataParallel(model)
    """,
    "compile-called-after-the-wrap": """
        def main():
            model = Net()
            wrapped = nn.DataParallel(model)
            model.compile()
            return wrapped
    """,
    "compile-only-without-data-parallel": """
        def main(n_gpu):
            model = Net()
            if n_gpu > 1:
                model = nn.DataParallel(model)
            else:
                model = torch.compile(model)
            return model
    """,
    "ddp-with-compile-is-supported": """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main():
            dist.init_process_group("gloo")
            model = DDP(torch.compile(Net()))
            return model
    """,
    "compiled-submodule-of-a-ddp-only-project": """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.compile(Net())
        def main():
            dist.init_process_group("gloo")
            return DDP(Outer())
    """,
    "compiled-submodule-in-a-model-library": """
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.compile(Net())
                self.compile()
    """,
    "compiled-submodule-where-the-wrapped-model-is-unknown": """
        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.compile(Net())
        def wrap(module):
            return nn.DataParallel(module)
    """,
    "other-compile-methods": """
        import re
        pattern = re.compile("x")
        class Outer(nn.Module):
            def __init__(self, other):
                super().__init__()
                self.rule = re.compile("a+")
                other.compile()
        model = nn.DataParallel(Outer(None))
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(NET) + dedent(CASES[name]))
