"""The project model on small multi-file projects: layouts and imports, where DataParallel reaches, callers'
guards across files, checkpoint provenance. Each project's files carry their `# expect:` marks."""

from __future__ import annotations

import os
from pathlib import Path
from textwrap import dedent

import pytest

from marks import expected
from pitfall_lint import parsing, pool
from pitfall_lint.checking import ProjectSettings, check_paths
from pitfall_lint.files import Excluder, discover
from pitfall_lint.project.model import ProjectModel
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
    root.mkdir(parents=True, exist_ok=True)
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
        "train.py": DDP_TRAIN + "import torch\nfrom net import Net\nmodel = torch.nn.DataParallel(torch.compile(Net()))  # expect: PFL106\n",
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
        "train.py": "import models\nfrom torch import nn\ndef run(arch):\n    return nn.DataParallel(models.__dict__[arch]())\n",
    },
    "in-a-ddp-project-an-unknown-wrap-reaches-what-its-file-names": {
        "a.py": MODULE + BOUND.format(name="A", base="nn.Module"),
        "b.py": MODULE + BOUND.format(name="B", base="nn.Module").replace("  # expect: PFL101", ""),
        "train.py": DDP_TRAIN,
        "featurize.py": "from torch import nn\nfrom a import A\ndef load(ckpt):\n    return nn.DataParallel(restore(ckpt))\n",
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
    "lightning-fabric-dp-strategy-wraps-every-module": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module"),
        "train.py": "import lightning as L\nfabric = L.Fabric(strategy=\"dp\")\n",
    },
    "lightning-trainer-on-several-devices-trains-distributed": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module").replace("  # expect: PFL101", ""),
        "train.py": "import lightning as L\nfrom net import Net\nL.Trainer(devices=2).fit(Net())\n",
    },
    "lightning-trainer-has-no-dp-strategy-since-2": {
        "net.py": MODULE + BOUND.format(name="Net", base="nn.Module").replace("  # expect: PFL101", ""),
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


def test_a_project_inside_another_is_checked_as_its_own_in_a_shared_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file against its nearest project, when the files of both share one pool of workers: the inner
    project wraps some model in DataParallel, which reaches every module of its own; the outer one trains with DDP,
    where that wrap is an aside that reaches only what its file names."""
    monkeypatch.setattr(pool, "available_cores", lambda: 2)
    padding = {f"pad_{i}.py": "import torch\n" for i in range(24)}
    write(tmp_path, {"net.py": MODULE + BOUND.format(name="Net", base="nn.Module").replace("  # expect: PFL101", ""), "train.py": DDP_TRAIN, **padding})
    inner = tmp_path / "inner"
    write(inner, {"net.py": MODULE + BOUND.format(name="Net", base="nn.Module"), "train.py": "from torch import nn\ndef run(build):\n    return nn.DataParallel(build())\n", **padding})
    assert pool.worker_count(len(list(tmp_path.rglob("*.py"))), 2) == 2
    found = run(tmp_path)
    assert ("inner/net.py", "PFL101", 7) in found and ("net.py", "PFL101", 7) not in found
    assert found == marks(tmp_path)


def test_a_small_project_inside_a_large_one_has_its_answers_worked_out_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project of a few files found inside a large one (Lightning's trainer folder has its own setup files) is
    too small to fill the workers, but its files are checked on them beside the large one's: its shared answers are
    worked out once, in the parent, as the large one's, not again on every worker."""
    compute_reach = ProjectModel._compute_reach

    def noted(self: ProjectModel, kind: str) -> object:
        with open(tmp_path.parent / f"{tmp_path.name}-reach", "a") as handle:
            handle.write(f"{os.getpid()}\n")
        return compute_reach(self, kind)  # type: ignore[arg-type]

    monkeypatch.setattr(pool, "available_cores", lambda: 2)
    monkeypatch.setattr(ProjectModel, "_compute_reach", noted)
    write(tmp_path, {"train.py": DDP_TRAIN, **{f"pad_{i}.py": "import torch\n" for i in range(48)}})
    write(tmp_path / "inner", {"net.py": MODULE + BOUND.format(name="Net", base="nn.Module"), "wrap.py": "from torch import nn\nfrom net import Net\nmodel = nn.DataParallel(Net())\n"})
    found = run(tmp_path)
    assert found == marks(tmp_path) and ("inner/net.py", "PFL101", 7) in found
    reached_in = [int(line) for line in (tmp_path.parent / f"{tmp_path.name}-reach").read_text().split()]
    assert set(reached_in) == {os.getpid()}  # each pass of the rounds, then prepare_shared: none on a worker


# A module whose lost state only matters where it is really wrapped (PFL104 reports where a wrap names it).
COUNTING = """
class {name}(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
    def forward(self, x):
        self.calls += 1{mark}
        return x
"""


def test_state_rules_need_a_wrap_that_names_the_module(tmp_path: Path) -> None:
    """PFL104's `told_only` reach: a named wrap in another file or data-parallel = "always", not an assumption."""
    for folder in ("library", "unknown", "named"):
        (tmp_path / folder).mkdir()
    library = {"net.py": MODULE + COUNTING.format(name="Net", mark="")}
    assert_project(tmp_path / "library", library)
    assert run(tmp_path / "library", "always") == {("net.py", "PFL104", 9)}
    unknown = {**library, "train.py": DDP_TRAIN + "import models\nfrom torch import nn\ndef run(arch):\n    return nn.DataParallel(models.__dict__[arch]())\n"}
    assert_project(tmp_path / "unknown", unknown)
    named = {
        "net.py": MODULE + COUNTING.format(name="Net", mark="  # expect: PFL104"),
        "inner.py": MODULE + COUNTING.format(name="Inner", mark="  # expect: PFL104"),
        "outer.py": MODULE + "from inner import Inner\nclass Outer(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.inner = Inner()\n",
        "train.py": DDP_TRAIN + "from torch import nn\nfrom net import Net\nfrom outer import Outer\n"
        "a = nn.DataParallel(Net())\nb = nn.DataParallel(Outer())\n",
    }
    assert_project(tmp_path / "named", named)


# A library (packaged: [project] in pyproject.toml, setup.py, setup.cfg) that trains with DDP still offers its models
# to users, who wrap them in nn.DataParallel (timm's FasterNet and its PConv: JierunChen/FasterNet#18).
PACKAGED = '[project]\nname = "mylib"\nversion = "1.0"\n'
FAST_NET = """
from torch import nn
class PartialConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3)
        self.forward = self.forward_slicing{mark}
    def forward_slicing(self, x):
        return self.conv(x)
class FastNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = PartialConv()
"""
FOUND, QUIET = "  # expect: PFL101", ""
LIBRARY_EXPORTS: dict[str, dict[str, str]] = {
    "imported-by-the-top-level-package": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .fast import FastNet\n", "mylib/fast.py": FAST_NET.format(mark=FOUND),
        "train.py": DDP_TRAIN,
    },
    "star-import-of-a-module-with-all-in-a-subpackage": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "", "mylib/models/__init__.py": "from .fast import *\n",
        "mylib/models/fast.py": "__all__ = ['FastNet']\n" + FAST_NET.format(mark=FOUND), "train.py": DDP_TRAIN,
    },
    "setup-py-and-a-src-layout": {
        "setup.py": "from setuptools import setup\nsetup(name='mylib')\n", "src/mylib/__init__.py": "from mylib.fast import FastNet\n",
        "src/mylib/fast.py": FAST_NET.format(mark=FOUND), "train.py": DDP_TRAIN,
    },
    "a-time-major-encoder-it-exports": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .encoder import Encoder\n",
        "mylib/encoder.py": "from torch import nn\nfrom torch.nn.utils.rnn import pad_packed_sequence\nclass Encoder(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.rnn = nn.LSTM(4, 4)\n    def forward(self, packed):\n"
        "        return pad_packed_sequence(self.rnn(packed)[0])[0]  # expect: PFL102\n",
        "train.py": DDP_TRAIN,
    },
    "a-model-built-by-a-class-whose-base-the-source-cannot-tell": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .hub import Hub\n",
        "mylib/hub.py": "from otherlib import Base\nfrom .fast import FastNet\nclass Hub(Base):\n    def __init__(self):\n"
        "        self.model = FastNet()\n",
        "mylib/fast.py": FAST_NET.format(mark=FOUND), "train.py": DDP_TRAIN,
    },
    # Not offered to users as a model.
    "a-model-built-by-a-trainer-that-is-no-module": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .trainer import Trainer\n",
        "mylib/trainer.py": "from abc import ABC\nfrom .fast import FastNet\nclass Loop(ABC):\n    pass\nclass Trainer(Loop):\n"
        "    def __init__(self):\n        self.model = FastNet()\n",
        "mylib/fast.py": FAST_NET.format(mark=QUIET), "train.py": DDP_TRAIN,
    },
    "a-repository-that-is-not-packaged": {
        "mylib/__init__.py": "from .fast import FastNet\n", "mylib/fast.py": FAST_NET.format(mark=QUIET), "train.py": DDP_TRAIN,
    },
    "offered-only-deep-inside-the-package": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "", "mylib/parts/__init__.py": "", "mylib/parts/conv/__init__.py": "from .fast import FastNet\n",
        "mylib/parts/conv/fast.py": FAST_NET.format(mark=QUIET), "train.py": DDP_TRAIN,
    },
    "left-out-of-the-all-a-star-import-reads": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .fast import *\n",
        "mylib/fast.py": "__all__ = ['helper']\n" + FAST_NET.format(mark=QUIET) + "def helper():\n    pass\n", "train.py": DDP_TRAIN,
    },
    "a-searcher-over-modules-it-is-given": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .search import Searcher\n",
        "mylib/search.py": "from torch import nn\nclass Searcher(nn.Module):\n    def __init__(self, joint):\n        super().__init__()\n"
        "        self.joint = joint\n        self.search = self.greedy\n    def greedy(self, x):\n        return self.joint(x)\n",
        "train.py": DDP_TRAIN,
    },
    # A pitfall that only matters where a wrap of the project names the module (PFL104) stays there.
    "lost-state-in-an-exported-model": {
        "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .net import Net\n",
        "mylib/net.py": MODULE + COUNTING.format(name="Net", mark="").replace("        return x", "        return self.fc(x)").replace(
            "        self.calls = 0", "        self.calls = 0\n        self.fc = nn.Linear(2, 2)"
        ),
        "train.py": DDP_TRAIN,
    },
}


def test_a_library_that_trains_with_ddp_offers_its_models_to_data_parallel(tmp_path: Path) -> None:
    """Each project its own folder: the models a packaged library offers by name are reached, with their submodules;
    what it does not offer, or offers only deep inside, or what holds no parameters of its own, or what a class that
    cannot be a module builds (nn.DataParallel takes modules alone), is not."""
    for name, files in LIBRARY_EXPORTS.items():
        assert_project(tmp_path / name, files)


# A packaged library whose export reaches a model only through summaries known one after the other: the export, the
# module it names, that class's base in another module, and the submodule the base builds, in a fourth.
EXPORT_CHAIN = {
    "pyproject.toml": PACKAGED, "mylib/__init__.py": "from .nets import Net\n",
    "mylib/nets.py": "from .base import Base\nclass Net(Base):\n    pass\n",
    "mylib/base.py": "from torch import nn\nfrom .blocks import Block\nclass Base(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.block = Block()\n",
    "mylib/blocks.py": MODULE + BOUND.format(name="Block", base="nn.Module").replace(
        "super().__init__()", "super().__init__()\n        self.fc = nn.Linear(2, 2)"
    ),
    "train.py": DDP_TRAIN, "evaluate.py": DDP_TRAIN,
    **{f"pad_{i}.py": "import torch\n" for i in range(48)},  # enough files for two workers
}


def summarised_in_parent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the process running the check summarises itself, once it runs."""
    parent, found = os.getpid(), []
    summarize = ProjectModel._summarize

    def noted(self: ProjectModel, path: str, data: bytes) -> object:
        if os.getpid() == parent:
            found.append(os.path.basename(path))
        return summarize(self, path, data)

    monkeypatch.setattr(pool, "available_cores", lambda: 2)
    monkeypatch.setattr(ProjectModel, "_summarize", noted)
    return found


def test_what_the_whole_project_asks_first_is_summarised_on_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the files are spread over the workers, the files that the reach of the wraps and of the library's
    exports read are summarised in the pool, round after round: the parent summarises none itself, but for a file
    that cannot be parsed (it has no summary to send back: it is tried once in the pool, and the rounds end all the
    same)."""
    in_parent = summarised_in_parent(monkeypatch)
    files = {**EXPORT_CHAIN, "mylib/__init__.py": "from .nets import Net\nfrom .broken import Old\n", "mylib/broken.py": "def broken(:\n"}
    assert_project(tmp_path, files)
    assert ("mylib/blocks.py", "PFL101", 8) in marks(tmp_path)
    assert in_parent == ["broken.py"]


def test_a_pass_for_the_summaries_wanted_keeps_the_answers_that_rest_on_no_guess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pass that gathers the summaries to compute next takes the missing ones as None; the answers that rest on
    such a guess are forgotten, the others serve the next pass and prepare_shared, and every answer is the one worked
    out from scratch."""
    write(tmp_path, EXPORT_CHAIN)
    files = sorted(str(path) for path in tmp_path.rglob("*.py"))
    computed: list[str] = []
    compute_reach = ProjectModel._compute_reach

    def noted(self: ProjectModel, kind: str) -> object:
        computed.append(kind)
        return compute_reach(self, kind)  # type: ignore[arg-type]

    monkeypatch.setattr(ProjectModel, "_compute_reach", noted)
    model, passes = ProjectModel(str(tmp_path), files), []
    while any(wanted := model.summaries_wanted()):
        summaries, walks = wanted
        passes.append([os.path.relpath(path, tmp_path) for path in summaries])
        assert walks == []  # the files that set training up (train.py, evaluate.py) are summarised
        for path in summaries:
            model.summary(path)
    assert passes == [["evaluate.py", "mylib/__init__.py", "train.py"], ["mylib/nets.py"], ["mylib/base.py"], ["mylib/blocks.py"]]
    computed.clear()
    model.prepare_shared()
    assert computed == []  # the last pass met no missing summary: its answers hold
    fresh = ProjectModel(str(tmp_path), files)
    fresh.prepare_shared()
    for kind in ("DataParallel", "DistributedDataParallel"):
        assert model._reach(kind) == fresh._reach(kind)  # type: ignore[arg-type]
    assert model._export_reach() == fresh._export_reach() != {}


def test_the_projects_of_a_monorepo_share_one_pool_for_their_summaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two libraries side by side in one run: their summaries are computed in one pool, rounds of both at once, and
    their files checked in the same pool."""
    in_parent = summarised_in_parent(monkeypatch)
    started = []
    start_pool = pool._pool

    def counted(*arguments: object) -> object:
        started.append(len(arguments[2]))  # type: ignore[arg-type]
        return start_pool(*arguments)  # type: ignore[arg-type]

    monkeypatch.setattr(pool, "_pool", counted)
    assert_project(tmp_path, {f"{library}/{name}": source for library in ("one", "two") for name, source in EXPORT_CHAIN.items()})
    assert {path for path, _, _ in marks(tmp_path)} == {"one/mylib/blocks.py", "two/mylib/blocks.py"}
    assert in_parent == []
    assert started == [2 * 54]  # the 54 Python files of both projects


def test_a_file_summarised_on_a_worker_is_checked_there_from_the_same_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker that parsed a file for its summary keeps the tree and checks the file itself: every file of the
    project is parsed once in the whole run (the checks of Lightning parsed 66 files a second time)."""
    log = tmp_path.parent / f"{tmp_path.name}-parses"
    parse_source = parsing.parse_source

    def noted(data: bytes, path: str) -> parsing.ParsedSource:
        with open(log, "a") as handle:  # one short write per parse, from every process
            handle.write(f"{os.path.relpath(path, tmp_path)}\n")
        return parse_source(data, path)

    monkeypatch.setattr(pool, "available_cores", lambda: 2)
    monkeypatch.setattr(parsing, "parse_source", noted)
    assert_project(tmp_path, EXPORT_CHAIN)
    parsed = log.read_text().split()
    assert sorted(parsed) == sorted(set(parsed))  # none twice
    assert {"mylib/base.py", "mylib/blocks.py", "mylib/nets.py", "train.py"} <= set(parsed)  # summarised, then checked


def test_a_kept_tree_whose_worker_took_no_copy_of_the_answers_is_checked_all_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a worker got no copy of the shared answers (the wait for the others ran past its limit), the files it kept
    trees for are not checked by a copy: they are checked after the others, wherever, with the same findings."""
    share = pool._share_in_worker

    def checks_none(pickled: bytes) -> list:
        assert pool._worker is not None
        kept = dict(pool._worker.kept)
        pool._worker.kept.clear()
        assert share(pickled) == []
        pool._worker.kept.update(kept)
        return []

    checks_none.__module__, checks_none.__qualname__ = pool.__name__, "_share_in_worker"  # sent by name to the workers
    monkeypatch.setattr(pool, "available_cores", lambda: 2)
    monkeypatch.setattr(pool, "_share_in_worker", checks_none)
    assert_project(tmp_path, EXPORT_CHAIN)
    assert ("mylib/blocks.py", "PFL101", 8) in marks(tmp_path)


def test_the_rounds_read_no_more_files_than_it_takes_to_tell_that_a_project_trains_in_parallel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether the project trains in parallel is read file by file until one sets it up: the rounds do not summarise
    every file that merely spells a set-up word (a comment here) to find out, but walk them for their set-ups alone,
    on the workers, the first pass four of them, the next twice as many: the main process walks none."""
    monkeypatch.setattr(pool, "available_cores", lambda: 2)
    asked: list[str] = []
    walked: list[list[str]] = []
    wanted = ProjectModel.summaries_wanted

    def noted(self: ProjectModel) -> tuple[list[str], list[str]]:
        found = wanted(self)
        asked.extend(os.path.basename(path) for path in found[0])
        walked.append([os.path.basename(path) for path in found[1]])
        return found

    parent, walked_here = os.getpid(), []
    read = ProjectModel._sets_up_distributed

    def walked_where(self: ProjectModel, path: str) -> bool | None:
        if os.getpid() == parent and self._wanted is None and self._store.get(self.content_key(path) + ":sets-up") is None:  # type: ignore[operator]
            walked_here.append(os.path.basename(path))
        return read(self, path)

    monkeypatch.setattr(ProjectModel, "summaries_wanted", noted)
    monkeypatch.setattr(ProjectModel, "_sets_up_distributed", walked_where)
    spelled = {f"a_launch_{i}.py": f"# dist.init_process_group is left to the launcher ({i})\n" for i in range(6)}
    assert_project(tmp_path, {**EXPORT_CHAIN, **spelled})
    assert not [name for name in asked if name.startswith("a_launch")]
    assert "blocks.py" in asked
    assert [names for names in walked if names][:2] == [[f"a_launch_{i}.py" for i in range(4)], ["a_launch_4.py", "a_launch_5.py"]]
    assert walked_here == []


def test_the_message_names_the_export(tmp_path: Path) -> None:
    """The export is the finding's related place, and the message names it, being in another file."""
    write(tmp_path, LIBRARY_EXPORTS["imported-by-the-top-level-package"])
    previous = os.getcwd()
    os.chdir(tmp_path)
    try:
        settings = ProjectSettings(Excluder([], tmp_path))
        results = check_paths(["mylib/fast.py"], list(all_rules()), settings, tmp_path, use_cache=False).results
    finally:
        os.chdir(previous)
    (diagnostic,) = results[0].diagnostics
    assert (diagnostic.code, diagnostic.line) == ("PFL101", 7)
    assert diagnostic.message.startswith(
        "`self.forward` holds the bound method `self.forward_slicing`, bound to the original module: nn.DataParallel "
        "replicas (of a model the library exports at mylib/__init__.py:1) would run it on the original's parameters; "
    )
    assert [(r.path, r.line, r.message) for r in diagnostic.related] == [("mylib/__init__.py", 1, "of a model the library exports")]



WRAPPED_ELSEWHERE: dict[str, dict[str, str]] = {
    "the-wrapped-class-and-its-base-in-other-files": {
        "models/__init__.py": "",
        "models/base.py": MODULE + "class Base(nn.Module):\n    def scaled(self, x):\n        return x * self.temperature\n",
        "models/net.py": MODULE + "from .base import Base\nclass Net(Base):\n    def __init__(self):\n"
        "        super().__init__()\n        self.temperature = 1.0\n    def freeze(self):\n        pass\n",
        "build.py": "from models.net import Net\ndef build():\n    return Net().cuda()\n",
        "train.py": "from torch import nn\nfrom build import build\nmodel = nn.DataParallel(build())\n"
        "model.temperature = 2.0  # expect: PFL212\nmodel.freeze()  # expect: PFL212\nmodel.note = 'x'\n",
    },
    "a-builder-two-files-away-returns-it-compiled": {
        "fast.py": "import torch\nfrom net import Net\ndef compiled():\n    return torch.compile(Net())\n",
        "net.py": MODULE + "class Net(nn.Module):\n    pass\n",
        "build.py": "from fast import compiled\ndef build():\n    return compiled()\n",
        "train.py": "from torch import nn\nfrom build import build\nmodel = nn.DataParallel(build())  # expect: PFL106\n"
        "other = nn.DataParallel(build) if False else None\n",
    },
}


@pytest.mark.parametrize("name", sorted(WRAPPED_ELSEWHERE))
def test_the_wrapped_model_is_told_across_files(tmp_path: Path, name: str) -> None:
    assert_project(tmp_path, WRAPPED_ELSEWHERE[name])


def test_wrapped_classes_and_their_members(tmp_path: Path) -> None:
    from pitfall_lint.project.model import ProjectModel

    write(tmp_path, WRAPPED_ELSEWHERE["the-wrapped-class-and-its-base-in-other-files"])
    files = [str(p) for p in tmp_path.rglob("*.py")]
    model = ProjectModel(str(tmp_path), files)
    train = str(tmp_path / "train.py")
    ((path, name, _, line),) = model.wrapped_classes(train, 3, 8)
    assert (path, name, line) == (str(tmp_path / "models" / "net.py"), "Net", 4)
    assert model.members(path, name) == [["__init__", "freeze", "scaled"], ["temperature"]]
    assert model.wrapped_classes(train, 3, 0) is None  # no wrap call starts there


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
    "unguarded-caller-through-a-star-import": {
        "io_helpers.py": SAVE_HELPER.format(mark="  # expect: PFL201"),
        "train.py": DDP_TRAIN + "from io_helpers import *\ndef loop(model):\n    save_weights(model, 'w.pt')\n",
    },
    "guarded-caller-through-a-star-import-of-a-package-module": {
        "utils/__init__.py": "",
        "utils/io.py": DDP_TRAIN + SAVE_HELPER.format(mark=""),
        "train.py": DDP_TRAIN + "from utils.io import *\nimport torch.distributed as dist\n"
        "def loop(model):\n    if dist.get_rank() == 0:\n        save_weights(model, 'w.pt')\n",
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
    "spawn-index-of-a-worker-spawned-from-another-file": {
        "worker.py": "import torch\nimport torch.distributed as dist\ndef run(proc, world):\n"
        "    dist.init_process_group('gloo', rank=proc, world_size=world)\n    if proc == 0:\n        torch.save({}, 'c.pt')\n",
        "launch.py": "import torch.multiprocessing as mp\nfrom worker import run\nif __name__ == '__main__':\n    mp.spawn(run, args=(2,), nprocs=2)\n",
    },
    "the-same-worker-that-nothing-spawns": {
        "worker.py": "import torch\nimport torch.distributed as dist\ndef run(proc, world):\n"
        "    dist.init_process_group('gloo', rank=proc, world_size=world)\n    if proc == 0:\n        torch.save({}, 'c.pt')  # expect: PFL201\n",
    },
    "helper-of-a-distributed-file-called-guarded-and-from-single-process-scripts": {
        "general.py": "import os\nimport torch\nRANK = int(os.getenv('RANK', -1))\ndef strip(f):\n    torch.save({}, f)\n",
        "train.py": DDP_TRAIN + "from general import RANK, strip\ndef end():\n    if RANK in {-1, 0}:\n        strip('best.pt')\n",
        "detect.py": "from general import strip\nstrip('weights.pt')\n",
    },
    "the-same-helper-called-on-every-rank": {
        "general.py": "import os\nimport torch\nRANK = int(os.getenv('RANK', -1))\ndef strip(f):\n    torch.save({}, f)  # expect: PFL201\n",
        "train.py": DDP_TRAIN + "from general import RANK, strip\ndef end():\n    strip('best.pt')\n",
        "detect.py": "from general import strip\nstrip('weights.pt')\n",
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


def test_a_summary_depends_on_its_file_alone(tmp_path: Path) -> None:
    """Summaries are cached by content: the project around a file must not change its summary, even where the
    rules' reading of it does change (the spawn index of a function spawned from another file)."""
    from pitfall_lint.project.model import ProjectModel

    worker = (
        "import torch\nimport torch.distributed as dist\ndef save_all():\n    torch.save({}, 'c.pt')\n"
        "def run(proc, world):\n    dist.init_process_group('gloo', rank=proc, world_size=world)\n"
        "    if proc == 0:\n        save_all()\n        torch.save({}, 'last.pt')\n"
    )
    launch = "import torch.multiprocessing as mp\nfrom worker import run\nif __name__ == '__main__':\n    mp.spawn(run, args=(2,), nprocs=2)\n"
    alone, together = tmp_path / "alone", tmp_path / "together"
    write(alone, {"worker.py": worker})
    write(together, {"worker.py": worker, "launch.py": launch})
    summaries = []
    for root in (alone, together):
        model = ProjectModel(str(root), [str(p) for p in root.glob("*.py")])
        summaries.append(model.summary(str(root / "worker.py")))
    assert summaries[0] is not None and summaries[0] == summaries[1]
    (call,) = [c for c in summaries[0].calls if c.callee == "save_all"]
    assert not call.guarded  # `proc` is the spawn index only in the second project: the summary cannot say
    # The rules, which may ask the project, read the direct guard differently in the two projects; the guard
    # around the helper's call is read from the summary, where the spawn index of another file is not known.
    assert run(alone) == {("worker.py", "PFL201", 4), ("worker.py", "PFL201", 9)}
    assert run(together) == {("worker.py", "PFL201", 4)}


def test_a_caller_that_passes_a_per_rank_path(tmp_path: Path) -> None:
    """mmengine's shape: the helper saves to the path it is given; a caller gives every rank its own file."""
    assert_project(tmp_path, {
        "ckpt.py": "import torch\ndef save_checkpoint(state, filename):\n    torch.save(state, filename)\n",
        "strategy.py": DDP_TRAIN + "import torch.distributed as dist\nfrom ckpt import save_checkpoint\n"
        "class Strategy:\n    def save(self, state, folder):\n        name = f'{folder}/rank{dist.get_rank()}.pth'\n"
        "        save_checkpoint(state, name)\n",
    })
    assert_project(tmp_path / "shared", {
        "ckpt.py": "import torch\ndef save_checkpoint(state, filename):\n    torch.save(state, filename)  # expect: PFL201\n",
        "strategy.py": DDP_TRAIN + "from ckpt import save_checkpoint\nclass Strategy:\n    def save(self, state, folder):\n"
        "        save_checkpoint(state, f'{folder}/latest.pth')\n",
    })


SAVES_UNLESS_SAFE = (
    "import torch\ndef save_progress(state, path, safe_serialization=False):\n    if safe_serialization:\n"
    "        pass\n    else:\n        torch.save(state, path){mark}\n"
)


def test_a_branch_that_every_caller_in_another_file_skips(tmp_path: Path) -> None:
    """diffusers' textual inversion shape: the helper saves with torch.save only when not told to use safetensors,
    and every call, in the training script, passes `safe_serialization=True`. The answer holds in a cached result."""
    import ast
    import json

    from pitfall_lint.project.model import ProjectModel, still_answered

    train = DDP_TRAIN + "from helpers import save_progress\ndef end(state):\n    save_progress(state, 'a.pt', safe_serialization={flag})\n"
    assert_project(tmp_path / "skipped", {"helpers.py": SAVES_UNLESS_SAFE.format(mark=""), "train.py": train.format(flag="True")})
    assert_project(tmp_path / "taken", {
        "helpers.py": SAVES_UNLESS_SAFE.format(mark="  # expect: PFL201"), "train.py": train.format(flag="False"),
    })
    root = tmp_path / "skipped"
    files = [str(p) for p in root.glob("*.py")]
    helpers = str(root / "helpers.py")
    view = ProjectModel(str(root), files).view(helpers)
    tree = ast.parse((root / "helpers.py").read_text())
    function = tree.body[1]
    assert view.every_rank_caller(function, [tree], ["1", "path"], [(["2", "safe_serialization"], False)]) is None
    assert view.every_rank_caller(function, [tree], ["1", "path"]) == [str(root / "train.py"), 9]
    cached = json.loads(json.dumps(view.questions()))
    assert still_answered(ProjectModel(str(root), files), cached)


WRITES_REFERENCE = "import torch\ndef write_reference(state, path):\n    torch.save(state, path){mark}\n"
VERIFY_TWO_WAYS = """
import argparse
import os
import torch.distributed as dist
from io_utils import write_reference
def single_run(args):
    write_reference({{}}, "reference.pt")
def dist_run(args):
    dist.init_process_group("nccl", rank=int(os.environ["RANK"])){dist_save}
if __name__ == "__main__":
    args = argparse.ArgumentParser().parse_args()
    if args.mode == "single":
        single_run(args)
    else:
        dist_run(args)
"""


def test_a_helper_that_only_the_single_process_side_of_a_launch_mode_switch_reaches(tmp_path: Path) -> None:
    """FSDP-Training's verify script, with the save in a helper module: `--mode single` runs as one plain process and
    `--mode dist` under torchrun; the helper is reached from the distributed side only when dist_run calls it."""
    assert_project(tmp_path / "single-only", {
        "io_utils.py": WRITES_REFERENCE.format(mark=""), "verify.py": VERIFY_TWO_WAYS.format(dist_save=""),
    })
    assert_project(tmp_path / "both", {
        "io_utils.py": WRITES_REFERENCE.format(mark="  # expect: PFL201"),
        "verify.py": VERIFY_TWO_WAYS.format(dist_save='\n    write_reference({}, "shared.pt")'),
    })


WORKER = "def train(rank, world_size):\n    pass\n"
SPAWNS = {
    "target-imported-from-a-package": {
        "workers/__init__.py": "",
        "workers/ddp.py": WORKER,
        "launch.py": "import torch.multiprocessing as mp\nfrom workers.ddp import train\ndef main():\n"
        "    mp.spawn(train, args=(0, 2), nprocs=2)  # expect: PFL302\n",
    },
    "target-through-a-module-attribute": {
        "workers.py": WORKER,
        "launch.py": "import torch.multiprocessing as mp\nimport workers\ndef main():\n"
        "    mp.spawn(workers.train, args=(), nprocs=2)  # expect: PFL302\n",
    },
    "target-re-exported-by-the-package": {
        "workers/__init__.py": "from .ddp import train\n",
        "workers/ddp.py": WORKER,
        "launch.py": "import torch.multiprocessing as mp\nfrom workers import train\ndef main():\n"
        "    mp.spawn(train, args=(2,), nprocs=2)\n    mp.spawn(train, args=(2, 3), nprocs=2)  # expect: PFL302\n",
    },
    "target-outside-the-project": {
        "launch.py": "import torch.multiprocessing as mp\nfrom somewhere_else import train\ndef main():\n"
        "    mp.spawn(train, args=(1, 2, 3), nprocs=2)\n",
    },
}


@pytest.mark.parametrize("name", sorted(SPAWNS))
def test_spawns(tmp_path: Path, name: str) -> None:
    assert_project(tmp_path, SPAWNS[name])


def test_spawned_signature_is_plain_data_that_a_cached_result_can_compare(tmp_path: Path) -> None:
    import ast
    import json

    from pitfall_lint.project.model import ProjectModel, still_answered

    write(tmp_path, SPAWNS["target-imported-from-a-package"])
    files = [str(p) for p in tmp_path.rglob("*.py")]
    launch = str(tmp_path / "launch.py")
    model = ProjectModel(str(tmp_path), files)
    call = next(n for n in ast.walk(ast.parse((tmp_path / "launch.py").read_text())) if isinstance(n, ast.Call))
    view = model.view(launch)
    assert view.spawned_signature(call) == [
        model.display(str(tmp_path / "workers" / "ddp.py")), "train", 1, "function", ["rank", "world_size"], 0, False, [], ["rank", "world_size"], False,
    ]
    cached = json.loads(json.dumps(view.questions()))
    assert still_answered(ProjectModel(str(tmp_path), files), cached)
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


@pytest.mark.parametrize(
    ("kind", "wrapping", "line"),
    [
        ("DistributedDataParallel", "from torch.nn.parallel import (\n    DistributedDataParallel as DDP,\n)\nw = DDP(Net())\n", 5),
        ("DistributedDataParallel", "import torch\nw = torch.nn.parallel.DistributedDataParallel \\\n    (Net())\n", 3),
        ("DataParallel", "import torch\nw = torch.nn.DataParallel\\\n(Net())\n", 3),
    ],
)
def test_a_wrap_is_found_however_its_call_is_spelled(tmp_path: Path, kind: str, wrapping: str, line: int) -> None:
    """Only the files that call the wrapper or import it under another name are read for its wraps; a file that
    names it for a type check is not."""
    from pitfall_lint.project.model import ProjectModel

    files = {
        "models.py": MODULE + "class Net(nn.Module):\n    pass\n",
        "train.py": "from models import Net\n" + wrapping,
        "check.py": "from torch import nn\nfrom torch.nn.parallel import DistributedDataParallel\ndef wrapped(m):\n"
        "    return isinstance(m, (nn.DataParallel, DistributedDataParallel))\n",
    }
    write(tmp_path, files)
    model = ProjectModel(str(tmp_path), [str(tmp_path / name) for name in files])
    reach = model.wrapper_reach(kind, str(tmp_path / "models.py"), "Net")  # type: ignore[arg-type]
    assert [(os.path.basename(e[0]), e[1], e[2]) for e in reach] == [("train.py", line, kind)]
    assert not model.has_summary(str(tmp_path / "check.py"))


def test_which_classes_hold_parameters(tmp_path: Path) -> None:
    from pitfall_lint.project.model import ProjectModel

    write(tmp_path, {"models.py": WRAPPED_MODELS, "train.py": WRAPPING})
    model = ProjectModel(str(tmp_path), [str(tmp_path / "models.py"), str(tmp_path / "train.py")])
    train = str(tmp_path / "train.py")
    assert model.holds_parameters(train, "models.Net") is True  # through its Block
    assert model.holds_parameters(str(tmp_path / "models.py"), "Act") is False
    assert model.holds_parameters(train, "torch.nn.Linear") is None  # not a class of the project


def test_a_search_for_a_name_and_the_index_of_names_agree(tmp_path: Path) -> None:
    """The first questions search the files' bytes, later ones read a list of every file's identifiers: both must name
    the same files, or a file checked alone (few questions) would get other diagnostics than in its project's run."""
    from pitfall_lint.project import model as project_model

    sources = {
        "a.py": "import utils\nutils.save(x)\n",
        "b.py": "x = 1e5\nsave_model()\n# utils.save in a comment\n",
        "c.py": "y.save_all()\nmy_utils.save\n",
        "d.py": "resave(utils)\n",
        "e.py": "\u00efutils.save()\n",  # bytes that are not ASCII bound a word, as `\\b` does in bytes
    }
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
    files = sorted(str(tmp_path / name) for name in sources)
    questions = [("save", "utils"), ("e5",), ("save_model",), ("utils",), ("01_train",), ("my-module",), ("save_all", "y")]
    searched = project_model.ProjectModel(str(tmp_path), files)
    by_search = [searched._files_naming(*names) for names in questions]
    assert searched._memo.get(("identifiers",)) is None  # no list yet: every answer came from a search
    indexed = project_model.ProjectModel(str(tmp_path), files)
    indexed._scans = project_model._SEARCHES_BEFORE_LISTING
    assert [indexed._files_naming(*names) for names in questions] == by_search
    a, b, c, d, e = (str(tmp_path / name) for name in sources)
    assert by_search == [[a, b, e], [], [b], [a, b, d, e], [], [], [c]]
