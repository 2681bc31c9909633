"""The project model on small multi-file projects: layouts and imports, where DataParallel reaches, callers'
guards across files, checkpoint provenance. Each project's files carry their `# expect:` marks."""

from __future__ import annotations

import os
from pathlib import Path
from textwrap import dedent

import pytest

from marks import expected
from pitfall_lint.checking import ProjectSettings, check_paths
from pitfall_lint.files import Excluder, discover
from pitfall_lint.rules import all_rules

MODULE = "import torch\nfrom torch import nn\n"
# A module whose forward is a stored bound method: PFL101 wherever DataParallel can reach it.
BOUND = """
class {name}({base}):
    def __init__(self):
        super().__init__()
        self.forward = self.fast  # expect: PFL101
    def fast(self, x):
        return x
"""
DDP_TRAIN = """
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
def main(model):
    dist.init_process_group("gloo")
    return DistributedDataParallel(model)
"""


def write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("")
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(source))


def run(root: Path, data_parallel: str = "auto") -> set[tuple[str, str, int]]:
    previous = os.getcwd()
    os.chdir(root)
    try:
        files = discover(["."], Excluder([], root), lambda _: None)
        settings = ProjectSettings(Excluder([], root), data_parallel)  # type: ignore[arg-type]
        results = check_paths([os.path.relpath(f) for f in files], list(all_rules()), settings, root, use_cache=False).results
    finally:
        os.chdir(previous)
    assert all(r.internal_error is None for r in results), [r.internal_error for r in results]
    return {(r.path, d.code, d.line) for r in results for d in r.diagnostics}


def marks(root: Path) -> set[tuple[str, str, int]]:
    return {
        (str(f.relative_to(root)), code, line)
        for f in root.rglob("*.py")
        for code, line in expected(f.read_text())
    }


def assert_project(root: Path, files: dict[str, str], data_parallel: str = "auto") -> None:
    write(root, files)
    assert run(root, data_parallel) == marks(root)


CASES: dict[str, dict[str, str]] = {
    "base-class-from-a-sibling-module-with-relative-import": {
        "models/__init__.py": "",
        "models/base.py": MODULE + "class Base(nn.Module):\n    pass\n",
        "models/net.py": "from .base import Base\n" + BOUND.format(name="Net", base="Base"),
        "train.py": "from torch import nn\nfrom models.net import Net\nmodel = nn.DataParallel(Net())\n",
    },
    "from-dot-import-module": {
        "models/__init__.py": "",
        "models/base.py": MODULE + "class Base(nn.Module):\n    pass\n",
        "models/net.py": "from . import base\n" + BOUND.format(name="Net", base="base.Base"),
    },
    "src-layout-and-module-alias": {
        "src/pkg/__init__.py": "",
        "src/pkg/layers.py": MODULE + "class Base(torch.nn.Module):\n    pass\n",
        "src/pkg/net.py": "import pkg.layers as layers\n" + BOUND.format(name="Net", base="layers.Base"),
    },
    "script-folder-imports-its-sibling": {
        "scripts/nets.py": MODULE + "class Base(nn.Module):\n    pass\n",
        "scripts/model.py": "from nets import Base\n" + BOUND.format(name="Net", base="Base"),
    },
    "re-exported-by-the-package": {
        "models/__init__.py": "from .base import Base\n",
        "models/base.py": MODULE + "class Base(nn.Module):\n    pass\n",
        "net.py": "from models import Base\n" + BOUND.format(name="Net", base="Base"),
    },
    "base-two-files-away": {
        "a.py": MODULE + "class A(nn.Module):\n    pass\n",
        "b.py": "from a import A\nclass B(A):\n    pass\n",
        "c.py": "from b import B\n" + BOUND.format(name="C", base="B"),
    },
    "external-base-is-not-taken-for-a-module": {
        "net.py": "from somewhere_else import Base\n" + BOUND.format(name="Net", base="Base").replace("  # expect: PFL101", ""),
    },
    "inheritance-cycle-does-not-hang": {
        "a.py": "from b import B\nclass A(B):\n    pass\n",
        "b.py": "from a import A\n" + BOUND.format(name="B", base="A").replace("  # expect: PFL101", ""),
    },
    "wrapped-through-a-builder-in-another-file": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module"),
        "other.py": MODULE + BOUND.format(name="Unused", base="nn.Module").replace("  # expect: PFL101", ""),
        "build.py": "from net import Net\ndef build():\n    return Net()\n",
        "train.py": "import torch\nfrom build import build\nmodel = torch.nn.DataParallel(build().to('cpu'))\n",
    },
    "a-compiled-model-runs-the-code-of-its-class": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module"),
        "other.py": MODULE + BOUND.format(name="Other", base="nn.Module").replace("  # expect: PFL101", ""),
        "train.py": DDP_TRAIN + "import torch\nfrom net import Net\nmodel = torch.nn.DataParallel(torch.compile(Net()))\n",
    },
    "reached-as-a-submodule-of-the-wrapped-one": {
        "inner.py": MODULE + BOUND.format(name="Inner", base="nn.Module"),
        "outer.py": MODULE + "from inner import Inner\nclass Outer(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.blocks = nn.ModuleList([Inner() for _ in range(2)])\n",
        "lonely.py": MODULE + BOUND.format(name="Lonely", base="nn.Module").replace("  # expect: PFL101", ""),
        "train.py": "from torch import nn\nfrom outer import Outer\nmodel = nn.DataParallel(Outer(), device_ids=[0, 1])\n",
    },
    "base-class-code-runs-in-the-wrapped-subclass": {
        "base.py": MODULE + BOUND.format(name="Base", base="nn.Module"),
        "child.py": "from base import Base\nclass Child(Base):\n    pass\n",
        "train.py": DDP_TRAIN + "from torch import nn\nfrom child import Child\nwrapped = nn.DataParallel(Child())\n",
    },
    "unknown-wrapped-model-reaches-every-module": {
        "a.py": MODULE + BOUND.format(name="A", base="nn.Module"),
        "b.py": MODULE + BOUND.format(name="B", base="nn.Module"),
        "train.py": DDP_TRAIN + "import models\nfrom torch import nn\ndef run(arch):\n    return nn.DataParallel(models.__dict__[arch]())\n",
    },
    "a-wrapped-third-party-model-reaches-none-of-ours": {
        "a.py": MODULE + BOUND.format(name="A", base="nn.Module").replace("  # expect: PFL101", ""),
        "train.py": "import torchvision\nfrom torch import nn\nmodel = nn.DataParallel(torchvision.models.resnet18())\n",
    },
    "ddp-only-project": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module").replace("  # expect: PFL101", ""),
        "train.py": DDP_TRAIN,
    },
    "model-library-that-trains-nothing": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module"),
        "util.py": "def helper():\n    return 1\n",
    },
    "transformers-trainer-wraps-its-model": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module"),
        "train.py": DDP_TRAIN + "from transformers import Trainer\nfrom net import Net\nTrainer(model=Net())\n",
    },
    "lightning-dp-strategy-wraps-every-module": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module"),
        "train.py": DDP_TRAIN + "import lightning as L\ntrainer = L.Trainer(strategy=\"dp\")\n",
    },
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_project(tmp_path: Path, name: str) -> None:
    assert_project(tmp_path, CASES[name])


def test_data_parallel_setting(tmp_path: Path) -> None:
    files = {"net.py": MODULE + BOUND.format(name="Net", base="nn.Module"), "train.py": DDP_TRAIN}
    write(tmp_path, files)
    assert run(tmp_path, "auto") == set()
    assert run(tmp_path, "always") == {("net.py", "PFL101", 7)}
    files["train.py"] = "from torch import nn\nfrom net import Net\nnn.DataParallel(Net())\n"
    write(tmp_path, files)
    assert run(tmp_path, "auto") == {("net.py", "PFL101", 7)}
    assert run(tmp_path, "never") == set()


SAVE_HELPER = "import torch\ndef save_weights(model, path):\n    torch.save(model.state_dict(), path){mark}\n"
SAVES = {
    "guarded-caller-in-another-file": {
        "utils/__init__.py": "",
        "utils/io.py": SAVE_HELPER.format(mark=""),
        "train.py": DDP_TRAIN + "from utils.io import save_weights\nimport os\nRANK = int(os.environ['RANK'])\n"
        "def loop(model):\n    if RANK in {-1, 0}:\n        save_weights(model, 'w.pt')\n",
    },
    "unguarded-caller-through-a-module-attribute": {
        "utils/__init__.py": "",
        "utils/io.py": SAVE_HELPER.format(mark="  # expect: PFL201"),
        "train.py": DDP_TRAIN + "from utils import io\ndef loop(model):\n    for step in range(3):\n        io.save_weights(model, 'w.pt')\n",
    },
    "one-caller-guarded-one-not": {
        "io_helpers.py": SAVE_HELPER.format(mark="  # expect: PFL201"),
        "train.py": DDP_TRAIN + "from io_helpers import save_weights\nimport torch.distributed as dist\n"
        "def end(model):\n    if dist.get_rank() == 0:\n        save_weights(model, 'w.pt')\n"
        "def each_epoch(model):\n    save_weights(model, 'w.pt')\n",
    },
    "a-chain-of-helpers-across-three-files": {
        "store.py": SAVE_HELPER.format(mark="  # expect: PFL201"),
        "checkpoints.py": "from store import save_weights\ndef save_all(model):\n    save_weights(model, 'w.pt')\n",
        "train.py": DDP_TRAIN + "import checkpoints\ndef loop(model):\n    checkpoints.save_all(model)\n",
    },
    "a-guard-higher-up-the-chain": {
        "store.py": SAVE_HELPER.format(mark=""),
        "checkpoints.py": "from store import save_weights\ndef save_all(model):\n    save_weights(model, 'w.pt')\n",
        "train.py": DDP_TRAIN + "import checkpoints\nimport torch.distributed as dist\ndef loop(model):\n"
        "    if dist.get_rank() != 0:\n        return\n    checkpoints.save_all(model)\n",
    },
    "called-only-from-single-process-code": {
        "store.py": SAVE_HELPER.format(mark=""),
        "export.py": "from store import save_weights\ndef main(model):\n    save_weights(model, 'w.pt')\n",
    },
    "mutual-recursion-does-not-hang": {
        "a.py": "import torch\nfrom b import g\ndef f(m, n):\n    torch.save(m, 'x.pt')  # expect: PFL201\n    g(m, n)\n",
        "b.py": "from a import f\ndef g(m, n):\n    f(m, n - 1)\n",
        "train.py": DDP_TRAIN + "from a import f\ndef loop(m):\n    f(m, 3)\n",
    },
}


@pytest.mark.parametrize("name", sorted(SAVES))
def test_saves(tmp_path: Path, name: str) -> None:
    assert_project(tmp_path, SAVES[name])


TRAIN_SAVES_WRAPPER = DDP_TRAIN + "import torch\ndef end(model):\n    model = DistributedDataParallel(model)\n" \
    "    if dist.get_rank() == 0:\n        torch.save(model.state_dict(), f'ckpt_{1}.pt')  # expect: PFL203\n"
LOADS = {
    "load-through-a-variable-and-a-key": {
        "train.py": TRAIN_SAVES_WRAPPER,
        "export.py": "import torch\ndef load(model, step):\n    state = torch.load(f'ckpt_{step}.pt')['model']\n"
        "    model.load_state_dict(state)  # expect: PFL203\n",
    },
    "prefix-stripped-before-loading": {
        "train.py": TRAIN_SAVES_WRAPPER,
        "export.py": "import torch\ndef load(model, step):\n    state = torch.load(f'ckpt_{step}.pt')\n"
        "    state = {k.replace('module.', ''): v for k, v in state.items()}\n    model.load_state_dict(state)\n",
    },
    "loaded-into-a-wrapper": {
        "train.py": TRAIN_SAVES_WRAPPER,
        "export.py": "import torch\nfrom torch import nn\ndef load(model, step):\n    model = nn.DataParallel(model)\n"
        "    model.load_state_dict(torch.load(f'ckpt_{step}.pt'))\n",
    },
    "another-checkpoint-name": {
        "train.py": TRAIN_SAVES_WRAPPER,
        "export.py": "import torch\ndef load(model):\n    model.load_state_dict(torch.load('best.pt'))\n",
    },
}


@pytest.mark.parametrize("name", sorted(LOADS))
def test_loads(tmp_path: Path, name: str) -> None:
    assert_project(tmp_path, LOADS[name])


WRAPPED_MODELS = MODULE + """
class Act(nn.Module):
    def forward(self, x):
        return x
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.act = Act()
"""
WRAPPING = """
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from models import Net
def build():
    return Net()
def main(options):
    dist.init_process_group("gloo")
    first = DDP(Net(), find_unused_parameters=True)
    second = DDP(build(), static_graph=options.static)
    nn.DataParallel(Net())
"""


def test_wrapper_reach_is_asked_per_wrapper_kind(tmp_path: Path) -> None:
    """One mechanism for DataParallel and DDP: every wrap of the kind, the class's own wraps first, each with the
    class that holds the module and the wrap's DDP options."""
    from pitfall_lint.project.model import ProjectModel

    write(tmp_path, {"models.py": WRAPPED_MODELS, "train.py": WRAPPING})
    model = ProjectModel(str(tmp_path), [str(tmp_path / "models.py"), str(tmp_path / "train.py")])
    models = str(tmp_path / "models.py")
    ddp = "DistributedDataParallel"
    assert [e[1:] for e in model.wrapper_reach(ddp, models, "Net")] == [
        [10, ddp, False, "", [["find_unused_parameters", "True"]]],
        [11, ddp, False, "", [["static_graph", "?"]]],
    ]
    assert {(e[1], e[4]) for e in model.wrapper_reach(ddp, models, "Block")} == {(10, "Net"), (11, "Net")}
    assert model.data_parallel_reach(models, "Net")[1:5] == [12, "DataParallel", True, ""]
    assert model.data_parallel_reach(models, "Act")[1:5] == [12, "DataParallel", True, "Net"]
    assert model.wrapper_reach(ddp, str(tmp_path / "train.py"), "main") == []


def test_which_classes_hold_parameters(tmp_path: Path) -> None:
    from pitfall_lint.project.model import ProjectModel

    write(tmp_path, {"models.py": WRAPPED_MODELS, "train.py": WRAPPING})
    model = ProjectModel(str(tmp_path), [str(tmp_path / "models.py"), str(tmp_path / "train.py")])
    train = str(tmp_path / "train.py")
    assert model.holds_parameters(train, "models.Net") is True  # through its Block
    assert model.holds_parameters(str(tmp_path / "models.py"), "Act") is False
    assert model.holds_parameters(train, "torch.nn.Linear") is None  # not a class of the project
