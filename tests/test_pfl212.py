"""PFL212 wrapper-attribute-without-module: the model's own names used on its DataParallel/DDP wrapper."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

NET = """
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
class Net(nn.Module):
    temperature = 1.0
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(4, 4)
        self.scale = 2.0
    def freeze_trunk(self):
        self.trunk.requires_grad_(False)
    def forward(self, x):
        return self.trunk(x) * self.scale / self.temperature
"""

CASES = {
    "method-on-ddp": """
        def main():
            dist.init_process_group("gloo")
            model = DDP(Net())
            model.freeze_trunk()  # expect: PFL212
    """,
    "method-on-data-parallel-full-spelling": """
        model = torch.nn.DataParallel(Net().cuda()).cuda()
        model.freeze_trunk()  # expect: PFL212
        print(model.scale)  # expect: PFL212
    """,
    "rebound-to-itself-moved-in-a-function": """
        def main():
            model = nn.DataParallel(Net())
            model = model.cuda()
            model.freeze_trunk()  # expect: PFL212
    """,
    "rebound-through-a-chain-at-module-level": """
        model = DDP(Net())
        model = model.to("cuda").train()
        model = model.half()
        model.freeze_trunk()  # expect: PFL212
    """,
    "rebound-after-a-wrap-under-a-condition": """
        def main(ddp, model):
            if ddp:
                model = DDP(model)
            model = model.requires_grad_()
            model.freeze_trunk()  # expect: PFL212
    """,
    "rebound-then-reached-through-module": """
        def main():
            model = nn.DataParallel(Net())
            model = model.cuda().float()
            model.module.freeze_trunk()
        model = DDP(Net())
        model = model.to("cuda")
        model.module.freeze_trunk()
    """,
    "rebound-to-what-the-wrapper-holds": """
        model = nn.DataParallel(Net())
        model = model.module.cuda()
        model.freeze_trunk()
    """,
    "assignment-the-module-never-sees": """
        model = nn.DataParallel(Net())
        model.temperature = 2.0  # expect: PFL212
        model.scale = 3.0  # expect: PFL212
        print(model.temperature)
    """,
    "unknown-attribute-still-fails": """
        model = nn.DataParallel(Net())
        model.predict_step(None)  # expect: PFL212
    """,
    "conditional-wrap": """
        def main(args, model):
            if args.distributed:
                dist.init_process_group("gloo")
                model = DDP(model)
            else:
                model = model.cuda()
            model.freeze_trunk()  # expect: PFL212
    """,
    "conditional-expression": """
        def main(net, ddp):
            dist.init_process_group("gloo")
            model = DDP(net) if ddp else net
            model.freeze_trunk()  # expect: PFL212
    """,
    "wrapper-api-is-fine": """
        def main():
            dist.init_process_group("gloo")
            model = DDP(Net(), device_ids=[0])
            model.train()
            model.zero_grad()
            with model.no_sync():
                pass
            model.module.freeze_trunk()
            model.module.temperature = 3.0
            print(model.device_ids, model.process_group, model.state_dict(), model.training)
            model.register_comm_hook(None, None)
        dp = nn.DataParallel(Net())
        print(dp.output_device, dp.src_device_obj, dp.dim, dp.module.scale)
    """,
    "bookkeeping-on-an-unknown-model": """
        def main(net):
            model = nn.DataParallel(net)
            model.epoch = 3
            print(model.epoch)
    """,
    "set-on-the-bare-model-before-the-wrap-read-after": """
        model = Net()
        model.scale = 4.0
        model = nn.DataParallel(model)
        assert model.scale == 4.0  # expect: PFL212
    """,
    "assignment-of-an-attribute-the-model-does-not-have": """
        model = nn.DataParallel(Net())
        model.best_accuracy = 0.0
        print(model.best_accuracy)
    """,
    "guarded-by-hasattr-or-try": """
        model = nn.DataParallel(Net())
        if hasattr(model, "freeze_trunk"):
            model.freeze_trunk()
        m = model.freeze_trunk if isinstance(model, Net) else None
        try:
            model.freeze_trunk()
        except AttributeError:
            pass
    """,
    "unwrapped-again": """
        def main():
            model = nn.DataParallel(Net())
            model = model.module
            model.freeze_trunk()
    """,
    "before-the-wrap": """
        def main():
            model = Net()
            model.freeze_trunk()
            model = nn.DataParallel(model)
            return model
    """,
    "another-scope": """
        model = nn.DataParallel(Net())
        def helper(model):
            model.freeze_trunk()
    """,
    "subclass-of-the-wrapper-is-not-the-wrapper": """
        class MyDP(nn.DataParallel):
            def freeze_trunk(self):
                self.module.freeze_trunk()
        model = MyDP(Net())
        model.freeze_trunk()
    """,
    "assignment-of-an-attribute-the-model-sets-but-never-reads": """
        class Labelled(nn.Module):
            def __init__(self):
                super().__init__()
                self.names = ["a", "b"]
            def forward(self, x):
                return x
        model = nn.DataParallel(Labelled())
        model.names = ["cat", "dog"]
    """,
    "another-librarys-wrapper-on-some-path": """
        def main(args, model):
            if args.local_rank != -1:
                from apex.parallel import DistributedDataParallel as ApexDDP
                model = ApexDDP(model)
            elif args.n_gpu > 1:
                model = torch.nn.DataParallel(model)
            if args.local_rank != -1:
                model.disable_allreduce()
    """,
    "the-other-branch-of-the-wrapping-if": """
        def prepare(self, model):
            if self.use_ddp:
                model = DDP(model)
            elif self.tp_enabled:
                if model.tp_size != 2:
                    raise ValueError("tp")
            return model
    """,
    "the-other-branch-of-an-if-on-the-same-test": """
        def main(ddp, model):
            if ddp:
                dist.init_process_group("gloo")
                model = DDP(model)
            else:
                model = model.cuda()
            if ddp:
                model.module.freeze_trunk()
            else:
                model.freeze_trunk()
    """,
    "guarded-in-a-boolean-test": """
        model = nn.DataParallel(Net())
        if hasattr(model, "trunk") and model.trunk is not None:
            pass
    """,
    "held-by-an-instance-attribute": """
        class Trainer:
            def __init__(self, args):
                self.model = Net()
                self.model.freeze_trunk()
                if args.gpus > 1:
                    self.model = torch.nn.DataParallel(self.model)
                self.model.freeze_trunk()  # expect: PFL212
            def optimizer(self):
                return torch.optim.SGD(self.model.trunk.parameters(), lr=0.1)  # expect: PFL212
            def step(self, x):
                self.model.train()
                if isinstance(self.model, nn.DataParallel):
                    return self.model.module.freeze_trunk()
                return self.model(x)
    """,
    "an-instance-attribute-also-given-back-the-bare-model": """
        class Trainer:
            def __init__(self):
                self.model = nn.DataParallel(Net())
            def unwrap(self):
                self.model = self.model.module
            def freeze(self):
                self.model.freeze_trunk()
    """,
    "a-branch-whose-assert-rules-out-the-wrap": """
        def evaluate(args, is_distributed, rank):
            model = Net()
            if is_distributed:
                model = DDP(model.cuda(rank), device_ids=[rank])
            if args.export:
                assert not args.fuse and not is_distributed, "export runs on one process"
                model.freeze_trunk()
                print(model.scale)
    """,
    "an-assert-of-the-plain-test": """
        def evaluate(single, rank):
            model = Net()
            if not single:
                model = DDP(model.cuda(rank), device_ids=[rank])
            assert single
            model.freeze_trunk()
    """,
    "an-early-exit-rules-out-the-wrap": """
        def export(world_size):
            model = Net()
            if world_size > 1:
                model = nn.DataParallel(model.cuda())
            if world_size > 1:
                raise SystemExit("export on one device")
            model.freeze_trunk()
    """,
    "an-assert-on-another-test-leaves-the-wrap": """
        def evaluate(args, is_distributed, rank):
            model = Net()
            if is_distributed:
                model = DDP(model.cuda(rank), device_ids=[rank])
            if args.export:
                assert not args.fuse
                model.freeze_trunk()  # expect: PFL212
            if args.export:
                raise SystemExit("no export")
            model.freeze_trunk()  # expect: PFL212
    """,
    "an-exit-that-does-not-end-the-branch-leaves-the-wrap": """
        def evaluate(is_distributed, rank):
            model = Net()
            if is_distributed:
                model = DDP(model.cuda(rank), device_ids=[rank])
            if is_distributed:
                print("distributed")
            model.freeze_trunk()  # expect: PFL212
    """,
    "an-instance-attribute-of-another-object": """
        class Trainer:
            def __init__(self, other):
                self.model = nn.DataParallel(Net())
                other.model.freeze_trunk()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(dedent(NET) + dedent(CASES[name]))


def test_a_wrapper_imported_inside_the_method_that_wraps() -> None:
    """The wrapper's name is read in the scope of the wrap, whatever the scope of the use."""
    from marks import assert_marks

    assert_marks(
        "from torch import nn\n"
        "class Task(nn.Module):\n"
        "    def __init__(self, student, device):\n"
        "        super().__init__()\n"
        "        from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "        self.student = DDP(student, device_ids=[device])\n"
        "    def step(self, x):\n"
        "        return self.student.freeze_trunk()  # expect: PFL212\n"
    )


def test_a_wrap_outside_init_does_not_reach_the_other_methods() -> None:
    """timm's distillation task: `compile` reads the bare module's `student`, and its caller compiles before
    `prepare_distributed` wraps; two methods may run in either order."""
    from marks import assert_marks

    assert_marks(
        "from torch import nn\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "class Task(nn.Module):\n"
        "    def prepare_distributed(self, device):\n"
        "        self.trainable = DDP(self.trainable, device_ids=[device])\n"
        "        self.trainable.student.eval()  # expect: PFL212\n"
        "    def compile(self):\n"
        "        return self.trainable.student\n"
    )


def test_a_file_that_calls_no_wrapper_is_not_parsed_for_the_rule() -> None:
    """Every finding is of a wrap the file makes: a file that only names a wrapper (Lightning's trainer.py, in a
    docstring) is not parsed for it, while each way a file can call one keeps it in."""
    from pitfall_lint.rules.wrapper_attribute_without_module import WrapperAttributeWithoutModule as Rule

    assert not Rule.may_apply(b'def lightning_module(self):\n    """Possibly wrapped into DataParallel or DistributedDataParallel."""\n')
    calls = [
        b"model = nn.DataParallel(net)", b"model = torch.nn.parallel.DistributedDataParallel (\n    net)",
        b"from torch.nn.parallel import DistributedDataParallel as DDP", b"model = nn.DataParallel\\\n(net)",
    ]
    assert all(Rule.may_apply(call) for call in calls)
