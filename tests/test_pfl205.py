"""PFL205 ddp-unused-parameters: submodules a DDP-wrapped module builds and its forward leaves without a gradient,
and every way a submodule is used that must not be taken for unused."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent

import pytest

from marks import assert_marks, expected

HEAD = """
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
"""
WRAP = """
def main():
    dist.init_process_group("gloo")
    model = DDP(Net())
"""


def source(body: str, wrap: str = WRAP) -> str:
    return HEAD + dedent(body) + wrap


REPORTED = {
    "used-in-one-branch-and-in-a-branch-of-another-test": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.extra = nn.Linear(4, 4)  # expect: PFL205
            def forward(self, x, train=True, verbose=False):
                x = self.fc(x)
                if train:
                    if verbose:
                        x = self.extra(x)
                else:
                    x = self.extra(x)
                return x
    """,
    "never-used": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.unused = nn.Linear(4, 4)  # expect: PFL205
            def forward(self, x):
                return self.fc(x)
    """,
    "under-a-branch-on-an-argument": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.mask_proj = nn.Linear(4, 4)  # expect: PFL205
            def forward(self, x, mask=None):
                x = self.fc(x)
                if mask is not None:
                    x = x + self.mask_proj(mask)
                return x
    """,
    "under-a-branch-on-a-setting": """
        class Net(nn.Module):
            def __init__(self, use_aux=False):
                super().__init__()
                self.use_aux = use_aux
                self.fc = nn.Linear(4, 4)
                self.aux = nn.Sequential(nn.Linear(4, 4), nn.ReLU())  # expect: PFL205
            def forward(self, x):
                out = self.fc(x)
                return out + self.aux(x) if self.use_aux else out
    """,
    "only-in-eval-mode": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.refiner = nn.Linear(4, 4)  # expect: PFL205
            def forward(self, x):
                x = self.fc(x)
                if not self.training:
                    return self.refiner(x)
                return x
    """,
    "past-an-early-return": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.second = nn.Linear(4, 4)  # expect: PFL205
            def forward(self, x, features_only=False):
                x = self.fc(x)
                if features_only:
                    return x
                return self.second(x)
    """,
    "a-parameter-and-a-project-module-of-another-class": """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.spare = Block()  # expect: PFL205
                self.scale = nn.Parameter(torch.ones(1))  # expect: PFL205
            def forward(self, x):
                return self.block(x)
    """,
    "through-a-helper-method-called-on-a-branch": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.head = nn.Linear(4, 2)  # expect: PFL205
            def classify(self, x):
                return self.head(x)
            def forward(self, x, classify=False):
                x = self.fc(x)
                if classify:
                    return self.classify(x)
                return x
    """,
    "static-graph-does-not-cover-a-branch-on-data": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.gate = nn.Linear(4, 4)  # expect: PFL205
                self.unused = nn.Linear(4, 4)
            def forward(self, x):
                if x.mean() > 0:
                    x = self.gate(x)
                return self.fc(x)
    """,
}
STATIC_GRAPH = "\ndef main():\n    model = DDP(Net(), static_graph=True)\n"


@pytest.mark.parametrize("name", REPORTED)
def test_reported(name: str) -> None:
    wrap = STATIC_GRAPH if name.startswith("static-graph") else WRAP
    assert_marks(source(REPORTED[name], wrap))


NOT_REPORTED = {
    "used-in-both-branches-of-one-test": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(4, 4)
                self.decoder = nn.Linear(4, 4)
            def forward(self, x, answer=None, train=True):
                if train:
                    hidden = self.encoder(x)
                    return self.decoder(hidden + answer).sum()
                else:
                    hidden = self.encoder(x)
                    if answer is None:
                        return self.decoder(hidden)
                    return self.decoder(hidden + answer)
    """,
    "used-in-a-branch-and-past-its-early-return": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 4)
            def forward(self, x, train=True):
                if train:
                    return self.head(x).sum()
                return self.head(x)
    """,
    "every-submodule-used": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.heads = nn.ModuleDict({"a": nn.Linear(4, 2)})
            def forward(self, x):
                x = self.fc(x)
                for layer in self.layers:
                    x = layer(x)
                return self.heads["a"](x)
    """,
    "no-parameters": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.act = nn.ReLU()
                self.drop = nn.Dropout(0.1)
                self.norm = nn.LayerNorm(4, elementwise_affine=False)
                self.loss = nn.CrossEntropyLoss()
            def forward(self, x):
                return self.fc(x)
    """,
    "frozen": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.teacher = nn.Linear(4, 4)
                self.anchor = nn.Parameter(torch.zeros(4), requires_grad=False)
                self.other = nn.Linear(4, 4)
                self.teacher.requires_grad_(False)
                for p in self.other.parameters():
                    p.requires_grad = False
            def forward(self, x):
                return self.fc(x)
    """,
    "built-under-the-same-condition": """
        class Net(nn.Module):
            def __init__(self, use_aux=False):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                if use_aux:
                    self.aux = nn.Linear(4, 4)
                self.proj = nn.Linear(4, 4) if use_aux else None
            def forward(self, x):
                x = self.fc(x)
                if hasattr(self, "aux"):
                    x = self.aux(x)
                if self.proj is not None:
                    x = self.proj(x)
                return x
    """,
    "used-when-training": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.aux = nn.Linear(4, 4)
            def forward(self, x):
                x = self.fc(x)
                if self.training:
                    x = x + self.aux(x)
                return x
    """,
    "reached-dynamically": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.layer1 = nn.Linear(4, 4)
            def forward(self, x):
                for name in ("fc", "layer1"):
                    x = getattr(self, name)(x)
                return x
    """,
    "handed-to-a-container-or-tied": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 4)
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
                self.seq = nn.Sequential(self.a, self.b)
                self.head = nn.Linear(4, 10)
                self.head.weight = self.embed.weight
            def forward(self, x):
                return self.head(self.seq(x))
    """,
    "used-by-a-base-class-forward": """
        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(4, 4)
            def forward(self, x):
                return self.stem(x)
        class Net(Base):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(4, 2)
            def forward(self, x):
                return self.head(super().forward(x))
    """,
    "find-unused-parameters": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.unused = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x)
    """,
    "static-graph-covers-a-never-used-one": """
        class Net(nn.Module):
            def __init__(self, use_aux=False):
                super().__init__()
                self.use_aux = use_aux
                self.fc = nn.Linear(4, 4)
                self.unused = nn.Linear(4, 4)
                self.aux = nn.Linear(4, 4)
            def forward(self, x):
                x = self.fc(x)
                if self.use_aux:
                    x = self.aux(x)
                return x
    """,
    "not-wrapped-in-ddp": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.unused = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x)
    """,
    "a-helper-that-takes-self": """
        def run_all(module, x):
            return module.fc(x) + module.other(x)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.other = nn.Linear(4, 4)
            def forward(self, x):
                return run_all(self, x)
    """,
}
WRAPS = {
    "find-unused-parameters": "\ndef main():\n    model = DDP(Net(), find_unused_parameters=True)\n",
    "static-graph-covers-a-never-used-one": STATIC_GRAPH,
    "not-wrapped-in-ddp": "\nmodel = Net()\n",
}


@pytest.mark.parametrize("name", NOT_REPORTED)
def test_not_reported(name: str) -> None:
    assert_marks(source(NOT_REPORTED[name], WRAPS.get(name, WRAP)))


def test_wrapped_through_a_builder_and_the_message() -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    body = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.unused = nn.Linear(4, 4)
            def forward(self, x):
                return self.fc(x)
        def build():
            return Net().to("cpu")
    """
    wrap = "\ndef main():\n    model = build()\n    model = DDP(model, device_ids=None)\n"
    text = source(body, wrap)
    (diagnostic,) = Engine(all_rules()).check_source("example.py", text.encode()).diagnostics
    assert (diagnostic.code, diagnostic.line) == ("PFL205", 11)
    assert diagnostic.message.startswith(
        "`self.unused` holds parameters that `forward` never uses (wrapped by DistributedDataParallel at line 19): "
    )


UNUSED_HEAD = """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.head = nn.Linear(4, 4)  # expect: PFL205
        def forward(self, x):
            return self.fc(x)
"""
# Wraps whose wrapper never takes part in a backward: DDP never waits for a gradient of theirs.
NEVER_IN_A_BACKWARD = {
    "a-teacher-frozen-as-a-whole-after-the-wrap": """
def main(train, has_batchnorms):
    dist.init_process_group("gloo")
    teacher = Net()
    if has_batchnorms:
        teacher = DDP(teacher)
        teacher_without_ddp = teacher.module
    else:
        teacher_without_ddp = teacher
    for p in teacher.parameters():
        p.requires_grad = False
    train(teacher, teacher_without_ddp)
""",
    "a-teacher-frozen-through-its-module": """
def main(train):
    dist.init_process_group("gloo")
    teacher = DDP(Net())
    teacher.module.requires_grad_(False)
    train(teacher)
""",
    "a-wrapper-run-only-without-grad-or-detached": """
def main(loader):
    dist.init_process_group("gloo")
    model = DDP(Net())
    for x in loader:
        with torch.no_grad():
            target = model(x)
        score = model(x).detach()
""",
}


@pytest.mark.parametrize("wrap", NEVER_IN_A_BACKWARD.values(), ids=NEVER_IN_A_BACKWARD)
def test_not_reported_for_a_wrapper_that_never_takes_part_in_a_backward(wrap: str) -> None:
    assert_marks(source(UNUSED_HEAD.replace("  # expect: PFL205", ""), wrap))


TAKES_PART_IN_A_BACKWARD = {
    "a-frozen-teacher-beside-a-trained-student-of-the-same-class": """
def main(loader):
    dist.init_process_group("gloo")
    student = DDP(Net())
    teacher = DDP(Net())
    teacher.requires_grad_(False)
    for x in loader:
        loss = (student(x) - teacher(x)).pow(2).mean()
        loss.backward()
""",
    "frozen-after-a-forward-with-grad": """
def main(x):
    dist.init_process_group("gloo")
    model = DDP(Net())
    model(x).sum().backward()
    model.requires_grad_(False)
""",
    "frozen-then-unfrozen-between-phases": """
def main(loader, generator):
    dist.init_process_group("gloo")
    critic = DDP(Net())
    critic.requires_grad_(False)
    for x in loader:
        critic.requires_grad_(True)
        critic(x).mean().backward()
        critic.requires_grad_(False)
        critic(generator(x)).mean().backward()
""",
    "run-without-grad-and-handed-to-a-trainer": """
def main(x, train):
    dist.init_process_group("gloo")
    model = DDP(Net())
    with torch.no_grad():
        model(x)
    train(model)
""",
}


@pytest.mark.parametrize("wrap", TAKES_PART_IN_A_BACKWARD.values(), ids=TAKES_PART_IN_A_BACKWARD)
def test_reported_for_a_wrapper_that_may_take_part_in_a_backward(wrap: str) -> None:
    assert_marks(source(UNUSED_HEAD, wrap))


def test_a_frozen_teacher_wrapped_in_another_file_is_not_reported(tmp_path: Path) -> None:
    """The wrap's file tells the project whether its wrapper takes part in a backward."""
    from click.testing import CliRunner

    from pitfall_lint.cli import main

    models = HEAD + dedent(UNUSED_HEAD)
    (tmp_path / "models.py").write_text(models)
    wraps = {
        "frozen": NEVER_IN_A_BACKWARD["a-teacher-frozen-as-a-whole-after-the-wrap"],
        "trained": TAKES_PART_IN_A_BACKWARD["frozen-after-a-forward-with-grad"],
    }
    found = {}
    for name, wrap in wraps.items():
        (tmp_path / "train.py").write_text(HEAD + "from models import Net\n" + wrap)
        result = CliRunner().invoke(main, ["check", "--no-cache", "--select", "PFL205", "--format", "json", str(tmp_path)])
        found[name] = (result.exit_code, {(Path(d["path"]).name, d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"]})
    assert found == {"frozen": (0, set()), "trained": (1, {("models.py", code, line) for code, line in expected(models)})}
