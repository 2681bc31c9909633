"""PFL402 missing-set-epoch: how a sampler reaches its loader and its epoch loop, and every way set_epoch is called."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

SETUP = """
import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset
dataset = TensorDataset(torch.arange(8))
"""

CASES = {
    "a-new-dataset-each-time-round": """
        for folder in ["a", "b"]:
            images = TensorDataset(torch.arange(8))
            loader = DataLoader(images, sampler=DistributedSampler(images))
            for batch in loader:
                pass
    """,
    "the-same-dataset-with-a-fresh-sampler-each-epoch": """
        for epoch in range(2):
            loader = DataLoader(dataset, sampler=DistributedSampler(dataset))  # expect: PFL402
            for batch in loader:
                pass
    """,
    "assigned-sampler": """
        sampler = DistributedSampler(dataset)  # expect: PFL402
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "explicit-shuffle-and-enumerate": """
        sampler = DistributedSampler(dataset, shuffle=True)  # expect: PFL402
        loader = DataLoader(dataset, batch_size=2, sampler=sampler)
        for epoch in range(2):
            for step, batch in enumerate(loader):
                pass
    """,
    "module-alias": """
        import torch.utils.data as tud
        loader = tud.DataLoader(dataset, sampler=tud.distributed.DistributedSampler(dataset))  # expect: PFL402
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "imported-alias-inline": """
        from torch.utils.data.distributed import DistributedSampler as DS
        loader = DataLoader(dataset, sampler=DS(dataset))  # expect: PFL402
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "while-loop-and-iter": """
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset))  # expect: PFL402
        step = 0
        while step < 10:
            batches = iter(loader)
            step += len(list(batches))
    """,
    "conditional-sampler": """
        def main(args):
            sampler = DistributedSampler(dataset) if args.distributed else None  # expect: PFL402
            loader = DataLoader(dataset, sampler=sampler, shuffle=sampler is None)
            for epoch in range(args.epochs):
                for batch in loader:
                    pass
    """,
    "batch-sampler": """
        batches = BatchSampler(DistributedSampler(dataset), batch_size=2, drop_last=False)  # expect: PFL402
        loader = DataLoader(dataset, batch_sampler=batches)
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "sampler-iterated-directly-through-a-batch-sampler": """
        sampler = DistributedSampler(range(8))  # expect: PFL402
        sampler = BatchSampler(sampler, batch_size=2, drop_last=False)
        for epoch in range(2):
            for indices in sampler:
                pass
    """,
    "sampler-in-a-kwargs-dict": """
        kwargs = {"batch_size": 2, "sampler": DistributedSampler(dataset)}  # expect: PFL402
        loader = DataLoader(dataset, **kwargs)
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "loader-returned-by-a-function": """
        def make_loader(data):
            return DataLoader(data, sampler=DistributedSampler(data))  # expect: PFL402
        def main():
            train_loader = make_loader(dataset)
            for epoch in range(2):
                for batch in train_loader:
                    pass
    """,
    "iterated-in-a-helper-called-from-the-loop": """
        def train_one_epoch(model, data_loader):
            for batch in data_loader:
                model(batch)
        def main(model):
            loader = DataLoader(dataset, sampler=DistributedSampler(dataset))  # expect: PFL402
            for epoch in range(2):
                train_one_epoch(model, loader)
    """,
    "class-holding-the-loader": """
        class Trainer:
            def __init__(self, train_data):
                self.train_data = train_data
            def _run_epoch(self, epoch):
                for source, target in self.train_data:
                    pass
            def train(self, epochs):
                for epoch in range(epochs):
                    self._run_epoch(epoch)
        def main():
            loader = DataLoader(dataset, sampler=DistributedSampler(dataset))  # expect: PFL402
            Trainer(loader).train(2)
    """,
    "set-epoch-once-before-the-loop": """
        sampler = DistributedSampler(dataset)  # expect: PFL402
        loader = DataLoader(dataset, sampler=sampler)
        sampler.set_epoch(0)
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "loader-built-in-the-loop-header": """
        sampler = DistributedSampler(dataset)  # expect: PFL402
        for epoch in range(2):
            for batch in DataLoader(dataset, sampler=sampler):
                pass
    """,
    "rebuilt-every-epoch-with-the-same-seed": """
        for epoch in range(2):
            loader = DataLoader(dataset, sampler=DistributedSampler(dataset))  # expect: PFL402
            for batch in loader:
                pass
    """,
    "helper-with-an-unrelated-call": """
        def log(model):
            print(model)
        def main(model):
            sampler = DistributedSampler(dataset)  # expect: PFL402
            loader = DataLoader(dataset, sampler=sampler)
            for epoch in range(2):
                log(model)
                print(len(sampler))
                for batch in loader:
                    pass
    """,
    # Not flagged: set_epoch is called in the loop.
    "set-epoch-on-the-sampler": """
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, sampler=sampler)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for batch in loader:
                pass
    """,
    "set-epoch-through-the-loader": """
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        for epoch in range(2):
            loader.sampler.set_epoch(epoch)
            for batch in loader:
                pass
    """,
    "set-epoch-through-the-batch-sampler": """
        train_loader = DataLoader(dataset, batch_sampler=BatchSampler(DistributedSampler(dataset), 2, False))
        for epoch in range(2):
            train_loader.batch_sampler.sampler.set_epoch(epoch)
            for batch in train_loader:
                pass
    """,
    "set-epoch-in-a-helper-called-in-the-loop": """
        def start_epoch(loader, epoch):
            loader.sampler.set_epoch(epoch)
        def main():
            loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
            for epoch in range(2):
                start_epoch(loader, epoch)
                for batch in loader:
                    pass
    """,
    "set-epoch-in-the-helper-that-iterates": """
        class Trainer:
            def __init__(self, train_data):
                self.train_data = train_data
            def _run_epoch(self, epoch):
                self.train_data.sampler.set_epoch(epoch)
                for source, target in self.train_data:
                    pass
            def train(self, epochs):
                for epoch in range(epochs):
                    self._run_epoch(epoch)
        def main():
            Trainer(DataLoader(dataset, sampler=DistributedSampler(dataset))).train(2)
    """,
    "sampler-handed-to-code-in-another-file": """
        from engine import train_one_epoch
        def main(model):
            sampler = DistributedSampler(dataset)
            loader = DataLoader(dataset, sampler=sampler)
            for epoch in range(2):
                train_one_epoch(model, loader, sampler=sampler)
                for batch in loader:
                    pass
    """,
    "infinite-wrapper-that-forwards-set-epoch": """
        class IterationBasedBatchSampler(BatchSampler):
            def __init__(self, batch_sampler):
                self.batch_sampler = batch_sampler
            def __iter__(self):
                while True:
                    for batch in self.batch_sampler:
                        yield batch
            def set_epoch(self, epoch):
                self.batch_sampler.sampler.set_epoch(epoch)
        def create_loader(data):
            batches = BatchSampler(DistributedSampler(data), 2, drop_last=False)
            return DataLoader(data, batch_sampler=IterationBasedBatchSampler(batches))
    """,
    # Not flagged: no shuffling, no second epoch, or no visible epoch loop.
    "shuffle-false": """
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset, shuffle=False))
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset, None, None, False))
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "evaluation-data": """
        val_sampler = DistributedSampler(dataset)
        test_loader = DataLoader(test_set, sampler=DistributedSampler(test_set))
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset_val))
        val_loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        eval_loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        def evaluate(model, data_loader):
            for batch in data_loader:
                model(batch)
        for epoch in range(2):
            for batch in DataLoader(dataset, sampler=val_sampler):
                pass
            evaluate(model, test_loader)
            evaluate(model, loader)
            for batch in val_loader:
                pass
            evaluate(model, eval_loader)
    """,
    "one-helper-builds-training-and-test-loaders": """
        class Trainer:
            def __init__(self, train_set, test_set):
                self.train_loader = self._prepare_dataloader(train_set)
                self.test_loader = self._prepare_dataloader(test_set)
            def _prepare_dataloader(self, data):
                return DataLoader(data, sampler=DistributedSampler(data))  # expect: PFL402
            def _run_epoch(self, epoch, dataloader):
                for batch in dataloader:
                    pass
            def train(self, epochs):
                for epoch in range(epochs):
                    self._run_epoch(epoch, self.train_loader)
                    self._run_epoch(epoch, self.test_loader)
    """,
    "helper-that-iterates-called-for-evaluation-and-for-training": """
        def batches(data):
            return (batch for batch in DataLoader(data, sampler=DistributedSampler(data)))  # expect: PFL402
        def validate(model):
            for batch in batches(dataset):
                model(batch)
        def fit(model):
            for batch in batches(dataset):
                model(batch)
        def main(model):
            for epoch in range(2):
                validate(model)
                fit(model)
    """,
    "helper-that-iterates-called-for-evaluation-only": """
        def batches(data, eval_set=False):
            return (batch for batch in DataLoader(data, sampler=DistributedSampler(data)))
        def pretrain_validation(model):
            for batch in batches(dataset):
                model(batch)
        def run_test(model):
            for batch in batches(dataset, eval_set=True):
                model(batch)
        def main(model):
            for epoch in range(2):
                pretrain_validation(model)
                run_test(model)
    """,
    "one-pass": """
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        for batch in loader:
            pass
        steps = iter(loader)
        for step in range(10):
            batch = next(steps)
    """,
    "length-only-in-a-loop": """
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        for epoch in range(2):
            for step in range(len(loader)):
                pass
    """,
    "iterated-in-code-in-another-file": """
        from engine import train_one_epoch
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        for epoch in range(2):
            train_one_epoch(loader)
    """,
    "rebuilt-every-epoch-with-the-epoch-as-seed": """
        for epoch in range(2):
            loader = DataLoader(dataset, sampler=DistributedSampler(dataset, seed=epoch))
            for batch in loader:
                pass
    """,
    "method-named-like-a-helper-on-another-object": """
        def train(loader):
            for batch in loader:
                pass
        def main(model):
            loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
            train(loader)
            for epoch in range(2):
                model.train()
    """,
    "local-class-named-distributed-sampler": """
        class DistributedSampler:
            def __init__(self, data):
                self.data = data
        loader = DataLoader(dataset, sampler=DistributedSampler(dataset))
        for epoch in range(2):
            for batch in loader:
                pass
    """,
    "sampler-chosen-in-an-if-else-then-returned-in-a-tuple": """
        def prepare_dataloaders(args):
            if args.distributed:
                train_sampler = DistributedSampler(dataset)  # expect: PFL402
                shuffle = False
            else:
                train_sampler = None
                shuffle = True
            train_loader = DataLoader(dataset, shuffle=shuffle, sampler=train_sampler)
            return train_loader, dataset
        def train(args):
            train_loader, valset = prepare_dataloaders(args)
            for epoch in range(10):
                for batch in train_loader:
                    pass
    """,
    "sampler-chosen-in-an-if-else-whose-else-holds-another": """
        def prepare(args):
            if args.distributed:
                sampler = DistributedSampler(dataset)  # expect: PFL402
            else:
                if args.fast:
                    workers = 1
                else:
                    workers = 2
                sampler = None
            return DataLoader(dataset, sampler=sampler)
        loader = prepare(args)
        for epoch in range(10):
            for batch in loader:
                pass
    """,
    "sampler-chosen-in-an-if-elif-chain": """
        def make(args):
            if args.weighted:
                sampler = None
            elif args.distributed:
                sampler = DistributedSampler(dataset)  # expect: PFL402
            else:
                sampler = None
            return DataLoader(dataset, sampler=sampler)
        loader = make(args)
        for epoch in range(10):
            for batch in loader:
                pass
    """,
    "sampler-chosen-in-an-if-else-with-set-epoch": """
        def prepare_dataloaders(args):
            if args.distributed:
                train_sampler = DistributedSampler(dataset)
            else:
                train_sampler = None
            return DataLoader(dataset, sampler=train_sampler), train_sampler
        train_loader, train_sampler = prepare_dataloaders(args)
        for epoch in range(10):
            if train_sampler is not None:
                train_sampler.set_epoch(epoch)
            for batch in train_loader:
                pass
    """,
    "loader-returned-in-a-tuple-then-set-epoch-through-it": """
        def loaders():
            sampler = DistributedSampler(dataset)
            return DataLoader(dataset, sampler=sampler), None
        train_loader, _ = loaders()
        for epoch in range(10):
            train_loader.sampler.set_epoch(epoch)
            for batch in train_loader:
                pass
    """,
    "loaders-returned-in-a-tuple-to-self-attributes": """
        class Trainer:
            def build_loaders(self):
                sampler = DistributedSampler(dataset)  # expect: PFL402
                return DataLoader(dataset, batch_size=2, sampler=sampler), DataLoader(dataset, batch_size=2)
            def fit(self, epochs):
                [self.train_loader, self.val_loader] = self.build_loaders()
                for epoch in range(epochs):
                    for batch in self.train_loader:
                        pass
    """,
    "sampler-in-the-main-block-with-its-loop": """
        if __name__ == "__main__":
            sampler = DistributedSampler(dataset)  # expect: PFL402
            loader = DataLoader(dataset, sampler=sampler)
            for epoch in range(10):
                for batch in loader:
                    pass
    """,
    "random-sampler-on-one-rank-distributed-sampler-under-a-launcher": """
        from torch.utils.data import RandomSampler
        if args.local_rank == -1:
            train_sampler = RandomSampler(dataset)
        else:
            train_sampler = DistributedSampler(dataset)  # expect: PFL402
        train_loader = DataLoader(dataset, sampler=train_sampler)
        for epoch in range(10):
            for batch in train_loader:
                pass
    """,
    "a-tuple-element-that-is-not-the-loader": """
        def loaders():
            sampler = DistributedSampler(dataset)
            return DataLoader(dataset, sampler=sampler), dataset
        _, data = loaders()
        for epoch in range(10):
            for batch in data:
                pass
    """,
    "sampler-built-in-a-loader-subclass": """
        class TrainLoader(DataLoader):
            def __init__(self, data, batch_size):
                sampler = DistributedSampler(data)  # expect: PFL402
                super().__init__(data, batch_size=batch_size, sampler=sampler)
        class Trainer:
            def __init__(self, loader):
                self.loader = loader
            def fit(self, epochs):
                for epoch in range(epochs):
                    self.train()
            def train(self):
                for batch in self.loader:
                    pass
        Trainer(TrainLoader(dataset, 2)).fit(10)
    """,
    "sampler-built-in-a-loader-subclass-old-style-super": """
        import torch.utils.data as data
        class MNISTDataLoader(data.DataLoader):
            def __init__(self, root, batch_size, train=True):
                sampler = None
                if train and torch.distributed.is_initialized():
                    sampler = data.DistributedSampler(dataset)  # expect: PFL402
                super(MNISTDataLoader, self).__init__(dataset, batch_size=batch_size, shuffle=(sampler is None), sampler=sampler)
        train_loader = MNISTDataLoader("data", 2, train=True)
        for epoch in range(10):
            for batch in train_loader:
                pass
    """,
    "sampler-built-in-a-loader-subclass-through-the-base-init": """
        class TrainLoader(DataLoader):
            def __init__(self, data):
                DataLoader.__init__(self, data, batch_size=2, sampler=DistributedSampler(data))  # expect: PFL402
        loader = TrainLoader(dataset)
        for epoch in range(10):
            for batch in loader:
                pass
    """,
    "loader-subclass-with-set-epoch-through-the-instance": """
        class TrainLoader(DataLoader):
            def __init__(self, data):
                super().__init__(data, sampler=DistributedSampler(data))
        loader = TrainLoader(dataset)
        for epoch in range(10):
            loader.sampler.set_epoch(epoch)
            for batch in loader:
                pass
    """,
    "loader-subclass-that-sets-the-epoch-in-its-own-iter": """
        class TrainLoader(DataLoader):
            def __init__(self, data):
                super().__init__(data, sampler=DistributedSampler(data))
                self.epoch = 0
            def __iter__(self):
                self.sampler.set_epoch(self.epoch)
                self.epoch += 1
                return super().__iter__()
        loader = TrainLoader(dataset)
        for epoch in range(10):
            for batch in loader:
                pass
    """,
}


@pytest.mark.parametrize("name", CASES)
def test_case(name: str) -> None:
    assert_marks(SETUP + dedent(CASES[name]))


@pytest.mark.parametrize(
    "framework",
    [
        "import lightning as L\n",
        "from pytorch_lightning import Trainer\n",
        "from lightning.fabric import Fabric\n",
        "def setup(accelerator, loader):\n    return accelerator.prepare(loader)\n",
    ],
)
def test_framework_files_are_not_checked(framework: str) -> None:
    assert_marks(SETUP + framework + dedent(CASES["assigned-sampler"]).replace("  # expect: PFL402", ""))


def test_message_names_the_loop_and_the_call_to_add() -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    source = SETUP + dedent(CASES["sampler-iterated-directly-through-a-batch-sampler"])
    (diagnostic,) = Engine(all_rules()).check_source("t.py", source.encode()).diagnostics
    assert "the loop at line 8 iterates `sampler`" in diagnostic.message
    assert "`sampler.sampler.set_epoch(epoch)`" in diagnostic.message


@pytest.mark.parametrize(
    ("name", "fix"),
    [
        ("assigned-sampler", {"loop": "8", "statement": "sampler.set_epoch(epoch)"}),
        # Built under an `if` that holds the loop too: every run of the loop has the sampler.
        ("sampler-in-the-main-block-with-its-loop", {"loop": "9", "statement": "sampler.set_epoch(epoch)"}),
        ("sampler-built-in-a-loader-subclass-through-the-base-init", {"loop": "10", "statement": "loader.sampler.set_epoch(epoch)"}),
        # The sampler exists on one path only: the other leaves None (or the loader's own sampler), with no set_epoch.
        ("conditional-sampler", None),
        ("random-sampler-on-one-rank-distributed-sampler-under-a-launcher", None),  # RandomSampler has no set_epoch
        ("sampler-chosen-in-an-if-else-then-returned-in-a-tuple", None),
        ("sampler-built-in-a-loader-subclass-old-style-super", None),
    ],
)
def test_fix_is_offered_only_where_every_path_builds_the_sampler(name: str, fix: dict[str, str] | None) -> None:
    from pitfall_lint.engine import Engine
    from pitfall_lint.rules import all_rules

    (diagnostic,) = Engine(all_rules()).check_source("t.py", (SETUP + dedent(CASES[name])).encode()).diagnostics
    assert diagnostic.code == "PFL402"
    assert (dict(diagnostic.fix.facts) if diagnostic.fix else None) == fix
