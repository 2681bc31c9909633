"""PFL401 missing-distributed-sampler: training loaders without a sampler in DDP scripts, and every exempt form."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest
from marks import assert_marks, inside

from pitfall_lint.checking import ProjectSettings, check_paths
from pitfall_lint.files import Excluder
from pitfall_lint.rules import all_rules

DDP_SETUP = """
import os
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
dist.init_process_group("gloo")
rank = dist.get_rank()
world_size = dist.get_world_size()
dataset = TensorDataset(torch.arange(8))
"""

CASES = {
    "synthetic-random-tensors-of-a-benchmark": """
        fake = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
        loader = DataLoader(fake, batch_size=2, shuffle=True)
    """,
    "synthetic-data-from-a-helper-through-variables": """
        def random_dataset(n, dim):
            data = torch.randn(n, dim)
            labels = torch.empty(n, dtype=torch.long).random_(dim)
            made = TensorDataset(data, labels)
            return made
        def random_dataloader(n, dim):
            fake = random_dataset(n, dim)
            return DataLoader(fake, batch_size=2, shuffle=True)
    """,
    "a-real-tensor-dataset-is-still-split": """
        real = TensorDataset(torch.load("features.pt", map_location="cpu"), torch.load("labels.pt", map_location="cpu"))
        loader = DataLoader(real, batch_size=2, shuffle=True)  # expect: PFL401
    """,
    "megatron-tensor-parallel-group-reads-the-same-batches": """
        from megatron.core import parallel_state
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)
        loader = DataLoader(dataset, batch_size=2, shuffle=True)
    """,
    "torch-tensor-parallel": """
        from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module
        model = parallelize_module(model, mesh, {"w1": ColwiseParallel()})
        loader = DataLoader(dataset, batch_size=2, shuffle=True)
    """,
    "shuffle-true": """
        loader = DataLoader(dataset, batch_size=2, shuffle=True)  # expect: PFL401
    """,
    "shuffle-positional": """
        loader = DataLoader(dataset, 2, True)  # expect: PFL401
    """,
    "dataset-keyword-and-sampler-none": """
        loader = DataLoader(dataset=dataset, shuffle=True, sampler=None)  # expect: PFL401
    """,
    "module-alias": """
        import torch.utils.data as tud
        loader = tud.DataLoader(dataset, shuffle=True)  # expect: PFL401
    """,
    "imported-alias": """
        from torch.utils.data import DataLoader as DL
        loader = DL(dataset, shuffle=True)  # expect: PFL401
    """,
    "fully-qualified-defining-module": """
        loader = torch.utils.data.dataloader.DataLoader(dataset, shuffle=True)  # expect: PFL401
    """,
    "named-for-training-without-shuffle": """
        train_loader = DataLoader(dataset, batch_size=2)  # expect: PFL401
    """,
    "training-dataset-name": """
        train_set = TensorDataset(torch.arange(8))
        loader = DataLoader(train_set, batch_size=2)  # expect: PFL401
    """,
    "function-named-for-training-returns-it": """
        def build_train_loader(data):
            return DataLoader(data, batch_size=2)  # expect: PFL401
    """,
    "in-a-method-with-shuffle-from-a-variable": """
        class Trainer:
            def __init__(self, train_data, shuffle):
                self.train_loader = DataLoader(train_data, shuffle=shuffle)  # expect: PFL401
    """,
    "unrelated-if-around-it": """
        for epoch in range(3):
            if epoch == 0:
                loader = DataLoader(dataset, shuffle=True)  # expect: PFL401
    """,
    "names-that-only-contain-an-evaluation-word": """
        value_loader = DataLoader(dataset, shuffle=True)  # expect: PFL401
        latest_loader = DataLoader(interval_set, shuffle=True)  # expect: PFL401
    """,
    # Not flagged: a sampler is given.
    "sampler-keyword": """
        loader = DataLoader(dataset, shuffle=False, sampler=DistributedSampler(dataset))
    """,
    "batch-sampler-keyword": """
        from torch.utils.data import BatchSampler
        sampler = BatchSampler(DistributedSampler(dataset), 2, False)
        train_loader = DataLoader(dataset, batch_sampler=sampler)
    """,
    "sampler-positional": """
        sampler = DistributedSampler(dataset)
        train_loader = DataLoader(dataset, 2, False, sampler)
    """,
    "sampler-maybe-in-kwargs": """
        kwargs = {"batch_size": 2, "sampler": DistributedSampler(dataset)}
        train_loader = DataLoader(dataset, shuffle=False, **kwargs)
    """,
    # Not flagged: evaluation, or nothing says training.
    "validation-loader": """
        val_loader = DataLoader(dataset, batch_size=2, shuffle=True)
        valid_dl = DataLoader(dataset, shuffle=True)
        testloader = DataLoader(dataset, shuffle=True)
    """,
    "evaluation-dataset": """
        eval_dataset = TensorDataset(torch.arange(4))
        loader = DataLoader(eval_dataset, shuffle=True)
        loader = DataLoader(datasets["validation"], shuffle=True)
    """,
    "evaluation-function": """
        def evaluate(model, data):
            loader = DataLoader(data, shuffle=True)
            return [model(x) for x in loader]
    """,
    "camel-case-evaluation-name": """
        class EvalHelper:
            def testLoader(self):
                return DataLoader(dataset, shuffle=True)
    """,
    "no-shuffle-no-training-name": """
        loader = DataLoader(dataset, batch_size=2)
        constraint_loader = DataLoader(dataset, batch_size=2)
    """,
    # Not flagged: the data is split per rank some other way.
    "manual-shard-by-rank": """
        shard = torch.utils.data.Subset(dataset, range(rank, 8, world_size))
        train_loader = DataLoader(shard, shuffle=True)
    """,
    "manual-shard-through-variables": """
        def main():
            indices = list(range(dist.get_rank(), 8, 2))
            part = torch.utils.data.Subset(dataset, indices)
            train_loader = DataLoader(part, shuffle=True)
    """,
    "split-dataset-by-node": """
        from datasets.distributed import split_dataset_by_node
        train_data = split_dataset_by_node(hf_dataset, rank=rank, world_size=world_size)
        train_loader = DataLoader(train_data, batch_size=2)
    """,
    "iterable-dataset-subclass": """
        from torch.utils.data import IterableDataset
        class Stream(IterableDataset):
            def __iter__(self):
                yield from range(8)
        class ShardedStream(Stream):
            pass
        train_loader = DataLoader(ShardedStream(), batch_size=2)
        train_stream = Stream()
        train_loader = DataLoader(train_stream, batch_size=2)
    """,
    "webdataset": """
        import webdataset as wds
        train_data = wds.WebDataset("shards-{000..009}.tar").shuffle(100)
        train_loader = DataLoader(train_data, batch_size=2)
    """,
    "parameter-dataset-in-a-file-with-streaming-datasets": """
        from torch.utils.data import IterableDataset
        class Stream(IterableDataset):
            pass
        def make_train_loader(data):
            return DataLoader(data, batch_size=2)
    """,
    # Not flagged: the single-process branch, or only one rank builds it.
    "single-process-else-branch": """
        if world_size > 1:
            train_loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        else:
            train_loader = DataLoader(dataset, shuffle=True)
    """,
    "single-process-conditional-expression": """
        def make(args):
            return DataLoader(dataset, sampler=DistributedSampler(dataset)) if args.distributed else DataLoader(dataset, shuffle=True)
    """,
    "single-process-after-early-return": """
        def make_train_loader(args):
            if args.distributed:
                return DataLoader(dataset, sampler=DistributedSampler(dataset))
            return DataLoader(dataset, shuffle=True)
    """,
    "rank-zero-only": """
        if rank == 0:
            train_loader = DataLoader(dataset, shuffle=True)
    """,
    "local-function-named-data-loader": """
        def DataLoader(data, shuffle):
            return data
        train_loader = DataLoader(dataset, shuffle=True)
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(DDP_SETUP + dedent(CASES[name]))


@pytest.mark.parametrize(
    "setup",
    [
        "import torch.distributed as dist\ndist.init_process_group('nccl')\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n",
        "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\n",
    ],
)
def test_distributed_files_are_recognised(setup: str) -> None:
    assert_marks(
        "from torch.utils.data import DataLoader\n" + setup + "loader = DataLoader(data, shuffle=True)  # expect: PFL401\n"
    )


def test_single_process_script_is_not_flagged() -> None:
    assert_marks("from torch.utils.data import DataLoader\ntrain_loader = DataLoader(data, shuffle=True)\n")


@pytest.mark.parametrize(
    "framework",
    [
        # Lightning and Accelerate put the sampler in themselves.
        "import lightning as L\n",
        "from pytorch_lightning import Trainer\n",
        "from lightning.fabric import Fabric\n",
        "def setup(accelerator, model, loader):\n    return accelerator.prepare(model, loader)\n",
        "def setup(self, loader):\n    return self.accelerator.prepare(loader)\n",
        # JAX feeds every device from one process; LOCAL_RANK there is a leftover argument.
        "import jax\n",
        "from flax import jax_utils\n",
    ],
)
def test_files_that_are_not_checked(framework: str) -> None:
    assert_marks(
        "import os\nfrom torch.utils.data import DataLoader\nlocal_rank = int(os.environ.get('LOCAL_RANK', -1))\n"
        + framework
        + "train_loader = DataLoader(data, shuffle=True)\n"
    )


_LAUNCHED = "import os\nfrom torch.utils.data import DataLoader\nlocal_rank = int(os.environ.get('LOCAL_RANK', -1))\n"


@pytest.mark.parametrize(
    "framework",
    [
        # catalyst's runners hand every loader to their engine's `prepare` (an accelerate Accelerator).
        "from catalyst import dl\nrunner = dl.SupervisedRunner()\n",
        "import catalyst.dl as dl\n",
        "from catalyst.dl import SupervisedRunner\n",
        # Ray Train's prepare_data_loader adds a DistributedSampler.
        "from ray.train.torch import prepare_data_loader\ndef setup(loader):\n    return prepare_data_loader(loader)\n",
        "import ray.train.torch\ndef setup(loader):\n    return ray.train.torch.prepare_data_loader(loader)\n",
        # fastai's distributed context wraps the loaders in a DistributedDL.
        "from fastai.distributed import *\ndef fit(learn):\n    with learn.distrib_ctx():\n        learn.fit(1)\n",
        "import fastai.distributed\ndef fit(learn):\n    learn.to_distributed(local_rank).fit(1)\n",
        # Opacus's make_private replaces the loader by one whose Poisson sampler draws each rank's batches.
        (
            "from opacus import PrivacyEngine\ndef setup(model, optimizer, loader):\n"
            "    return PrivacyEngine().make_private(module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0)\n"
        ),
        "import opacus\ndef setup(engine, m, o, loader):\n    return engine.make_private_with_epsilon(module=m, optimizer=o, data_loader=loader, poisson_sampling=True)\n",
        # The `prepare` of a class derived from accelerate's Accelerator, whatever the instance is called.
        (
            "from accelerate import Accelerator\nclass Engine(Accelerator):\n    pass\nengine = Engine()\n"
            "def setup(loader):\n    return engine.prepare(loader)\n"
        ),
        (
            "import accelerate\nclass Base(accelerate.Accelerator):\n    pass\nclass Engine(Base):\n    pass\n"
            "def setup(loader):\n    return Engine().prepare(loader)\n"
        ),
    ],
)
def test_frameworks_that_shard_the_loaders_they_are_given(framework: str) -> None:
    assert_marks(_LAUNCHED + framework + "train_loader = DataLoader(data, shuffle=True)\n")


@pytest.mark.parametrize(
    "framework",
    [
        # Imported, but the loaders never go through the part that shards them.
        "import ray\nray.init()\n",
        "from fastai.vision.all import *\n",
        "from opacus import PrivacyEngine\ndef setup(engine, m, o, loader):\n    return engine.make_private(module=m, optimizer=o, data_loader=loader, poisson_sampling=False)\n",
        # Made private on one path only: the plain-DDP path keeps the loader as it is.
        "from opacus import PrivacyEngine\ndef setup(args, engine, m, o, loader):\n    if not args.disable_dp:\n        return engine.make_private(module=m, optimizer=o, data_loader=loader)\n    return loader\n",
        "class Engine:\n    def prepare(self, loader):\n        return loader\ndef setup(loader):\n    return Engine().prepare(loader)\n",
        "from accelerate import Accelerator\nclass Engine:\n    pass\ndef setup(loader):\n    return Engine().prepare(loader)\n",
    ],
)
def test_frameworks_that_do_not_shard_these_loaders(framework: str) -> None:
    assert_marks(_LAUNCHED + framework + "train_loader = DataLoader(data, shuffle=True)  # expect: PFL401\n")


def test_a_project_engine_derived_from_accelerator(tmp_path: Path) -> None:
    """The Accelerator subclass lives in another module of the project: its `prepare` still shards the loaders."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "engine.py").write_text("from accelerate import Accelerator\n\nclass Engine(Accelerator):\n    pass\n")
    (tmp_path / "plain.py").write_text("class Engine:\n    def prepare(self, loader):\n        return loader\n")
    source = "{import}\n" + _LAUNCHED + "engine = Engine()\ntrain_loader = engine.prepare(DataLoader(data, shuffle=True))\n"
    (tmp_path / "sharded.py").write_text(source.format(**{"import": "from engine import Engine"}))
    (tmp_path / "unsharded.py").write_text(source.format(**{"import": "from plain import Engine"}))
    with inside(tmp_path):
        files = ["engine.py", "plain.py", "sharded.py", "unsharded.py"]
        results = check_paths(files, list(all_rules()), ProjectSettings(Excluder([], tmp_path)), tmp_path, use_cache=False).results
    assert {(r.path, d.code, d.line) for r in results for d in r.diagnostics} == {("unsharded.py", "PFL401", 6)}


@pytest.mark.parametrize(
    "unit",
    [
        'unit = MyUnit(module=model, device=device, strategy="ddp")\n',
        'unit = MyUnit(module=model, device=device, strategy="fsdp")\n',
        'unit = MyUnit(module=model, strategy="ddp" if torch.distributed.is_initialized() else None)\n',
        "from torchtnt.utils.prepare_module import DDPStrategy\nunit = MyUnit(module=model, strategy=DDPStrategy())\n",
        "from torchtnt.utils.prepare_module import prepare_ddp\nmodel = prepare_ddp(model, device)\n",
    ],
)
def test_torchtnt_runs_ddp_without_a_sampler(unit: str) -> None:
    """torchtnt's strategies wrap the module in DDP/FSDP but never split the loaders."""
    assert_marks(
        "from torch.utils.data import DataLoader\nfrom torchtnt.framework.fit import fit\n"
        "from torchtnt.utils import init_from_env\ndevice = init_from_env()\n"
        + unit
        + "train_dataloader = DataLoader(train_dataset, batch_size=64)  # expect: PFL401\nfit(unit, train_dataloader=train_dataloader)\n"
    )


@pytest.mark.parametrize(
    "unit",
    [
        "from torchtnt.framework.fit import fit\nunit = MyUnit(module=model, device=device)\n",  # one process
        'from torchtnt.framework.fit import fit\nunit = MyUnit(module=model, strategy=None)\n',
        'from mylib import fit\nunit = MyUnit(module=model, strategy="ddp")\n',  # not torchtnt: unknown
    ],
)
def test_torchtnt_without_a_parallel_strategy(unit: str) -> None:
    assert_marks("from torch.utils.data import DataLoader\n" + unit + "train_dataloader = DataLoader(train_dataset, batch_size=64)\n")


def test_a_file_whose_loaders_all_have_a_sampler_is_not_searched_for_its_set_ups(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loader given a sampler is never told: the walk for the file's set-ups is made only for one that has none."""
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import missing_distributed_sampler

    searched: list[str] = []
    monkeypatch.setattr(missing_distributed_sampler, "sets_up_distributed", lambda ctx: searched.append(ctx.path) or True)
    sampled = DDP_SETUP + "loader = DataLoader(dataset, sampler=DistributedSampler(dataset), shuffle=False)\n"
    assert Engine(all_rules()).check_source("train.py", sampled.encode()).diagnostics == ()
    assert searched == []
    unsampled = DDP_SETUP + "loader = DataLoader(dataset, batch_size=2, shuffle=True)\n"
    assert [d.code for d in Engine(all_rules()).check_source("train.py", unsampled.encode()).diagnostics] == ["PFL401"]
    assert searched == ["train.py"]
