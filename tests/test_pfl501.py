"""PFL501 optimizer-before-move: every way to build an optimizer and move the model, the cases that really
break (warning) and the advisory ones (info), and the orders, scopes and round trips it must leave alone."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks, expected
from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

SETUP = """
import torch
import torch.nn as nn
"""

CASES = {
    "sgd-before-to-device": """
        model = nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: PFL501
        model.to("cuda")
    """,
    "adam-before-cuda-in-function": """
        def main():
            model = nn.Linear(2, 2)
            opt = torch.optim.Adam(model.parameters())  # expect: PFL501
            model.cuda()
    """,
    "optim-module-alias": """
        from torch import optim as topt
        def main(device):
            model = nn.Linear(2, 2)
            opt = topt.AdamW(model.parameters())  # expect: PFL501
            model = model.to(device)
    """,
    "optimizer-class-imported": """
        from torch.optim import RMSprop as Rms
        def main(device):
            net = nn.Linear(2, 2)
            opt = Rms(params=net.parameters())  # expect: PFL501
            net.to(device=device)
    """,
    "named-parameters-and-filter": """
        def main(device):
            model = nn.Linear(2, 2)
            decay = [p for n, p in model.named_parameters() if "bias" not in n]
            opt = torch.optim.SGD(decay, lr=0.1)  # expect: PFL501
            frozen = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)  # expect: PFL501
            model.to(device)
    """,
    "param-groups-of-submodules": """
        def main(model):
            groups = [{"params": model.backbone.parameters()}, {"params": model.head.parameters(), "lr": 1e-3}]
            opt = torch.optim.SGD(groups, lr=0.1)  # expect: PFL501
            model.cuda()
    """,
    "submodule-moved": """
        def main(model):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: PFL501
            model.encoder.cuda()
    """,
    "move-inside-a-wrapper": """
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main(model, local_rank):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: PFL501
            model = DDP(model.to(local_rank), device_ids=[local_rank])
    """,
    "self-attribute-model": """
        class Trainer:
            def __init__(self, model, device):
                self.model = model
                self.optimizer = torch.optim.Adam(self.model.parameters())  # expect: PFL501
                self.model.to(device)
    """,
    "adagrad-before-move": """
        def main(device):
            model = nn.Linear(2, 2)
            opt = torch.optim.Adagrad(model.parameters())  # expect: PFL501
            model.to(device)
    """,
    "overwrite-flag-makes-dtype-casts-count": """
        torch.__future__.set_overwrite_module_params_on_conversion(True)
        def main():
            model = nn.Linear(2, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: PFL501
            model.double()
    """,
    # Left alone.
    "optimizer-after-move": """
        def main(device):
            model = nn.Linear(2, 2)
            model.to(device)
            opt = torch.optim.Adagrad(model.parameters())
    """,
    "model-built-on-device": """
        def main(device):
            model = nn.Linear(2, 2).to(device)
            other = nn.Linear(2, 2, device=device)
            opt = torch.optim.SGD([*model.parameters(), *other.parameters()], lr=0.1)
            for step in range(3):
                model.cpu()
                model.to(device)
                other.to(device)
    """,
    "round-trip-through-cpu-first": """
        def main(model, device):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model = model.cpu()
            model.to(device)
    """,
    "move-in-another-function": """
        def build(model):
            return torch.optim.SGD(model.parameters(), lr=0.1)
        def place(model, device):
            model.to(device)
    """,
    "exclusive-branches": """
        def main(model, use_cpu):
            if use_cpu:
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            else:
                model.cuda()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
    """,
    "dtype-cast-without-the-overwrite-flag": """
        def main(model):
            opt = torch.optim.Adagrad(model.parameters())
            model.to(torch.float16)
            model.to(dtype=torch.bfloat16)
            model.half()
    """,
    "another-model-moved": """
        def main(student, teacher):
            opt = torch.optim.SGD(student.parameters(), lr=0.1)
            teacher.cuda()
    """,
    "model-rebound-before-the-move": """
        def main(device):
            model = nn.Linear(2, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model = nn.Linear(3, 3)
            model.to(device)
    """,
    "framework-places-the-model": """
        def main(model, accelerator):
            optimizer = torch.optim.AdamW(model.parameters())
            model, optimizer = accelerator.prepare(model, optimizer)
            model.to(accelerator.device)
    """,
    "model-chosen-at-run-time": """
        def main(unet, text_encoder, train_unet, device):
            opt = torch.optim.AdamW(unet.parameters() if train_unet else text_encoder.parameters())
            if not train_unet:
                unet.to(device)
    """,
    "local-class-named-like-an-optimizer": """
        class SGD:
            def __init__(self, params):
                self.params = list(params)
        def main(model):
            opt = SGD(model.parameters())
            model.cuda()
    """,
    "scheduler-is-no-optimizer": """
        def main(model, opt):
            sched = torch.optim.lr_scheduler.StepLR(opt, 1)
            model.cuda()
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))


def _severities(source: str) -> list[str]:
    result = Engine(all_rules()).check_source("example.py", (SETUP + dedent(source)).encode())
    assert expected(SETUP + dedent(source)), "the case marks nothing"
    return [d.severity for d in result.diagnostics if d.code == "PFL501"]


@pytest.mark.parametrize(
    ("name", "severity"),
    [
        ("sgd-before-to-device", "info"),
        ("adam-before-cuda-in-function", "info"),
        ("adagrad-before-move", "warning"),
        ("overwrite-flag-makes-dtype-casts-count", "warning"),
    ],
)
def test_only_the_breaking_cases_are_warnings(name: str, severity: str) -> None:
    assert _severities(CASES[name]) == [severity]


def test_messages_say_advisory_or_fails() -> None:
    result = Engine(all_rules()).check_source("example.py", (SETUP + dedent(CASES["sgd-before-to-device"])).encode())
    assert result.diagnostics[0].message.startswith("advisory:")
    result = Engine(all_rules()).check_source("example.py", (SETUP + dedent(CASES["adagrad-before-move"])).encode())
    assert "fails" in result.diagnostics[0].message
