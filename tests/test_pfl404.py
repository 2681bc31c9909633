"""PFL404 rank-seeding: rank-dependent DistributedSampler seeds, and one seed on every rank for random augmentation."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from marks import assert_marks
from test_projects import check

DDP_SETUP = """
import os
import random
import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import transforms
dist.init_process_group("gloo")
rank = dist.get_rank()
"""

AUGMENTATION = """
augment = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
"""

SAMPLER_CASES = {
    "seed-is-the-rank": """
        sampler = DistributedSampler(dataset, seed=rank)  # expect: PFL404
    """,
    "seed-plus-get-rank": """
        sampler = DistributedSampler(dataset, seed=args.seed + dist.get_rank())  # expect: PFL404
    """,
    "seed-from-the-environment": """
        sampler = DistributedSampler(dataset, seed=int(os.environ["RANK"]))  # expect: PFL404
    """,
    "seed-through-a-variable": """
        def make(dataset, args):
            seed = args.seed + args.local_rank
            return DistributedSampler(dataset, shuffle=True, seed=seed)  # expect: PFL404
    """,
    "seed-positional": """
        sampler = DistributedSampler(dataset, 2, rank, True, 42 + rank)  # expect: PFL404
    """,
    "aliases": """
        import torch.utils.data.distributed as tdd
        from torch.utils.data import DistributedSampler as DS
        a = tdd.DistributedSampler(dataset, seed=rank)  # expect: PFL404
        b = DS(dataset, seed=rank)  # expect: PFL404
    """,
    # Not flagged: one seed on every rank.
    "rank-keyword-is-fine": """
        sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=args.seed)
    """,
    "constant-and-default-seeds": """
        a = DistributedSampler(dataset, seed=0)
        b = DistributedSampler(dataset, 2, rank, True)
        c = DistributedSampler(dataset)
    """,
    "local-class-named-distributed-sampler": """
        class DistributedSampler:
            def __init__(self, data, seed):
                pass
        sampler = DistributedSampler(dataset, seed=rank)
    """,
}

GLOBAL_SEED_CASES = {
    "torch-manual-seed-literal": """
        torch.manual_seed(0)  # expect: PFL404
    """,
    "python-and-numpy-seeds-through-a-constant": """
        SEED = 42
        def main():
            random.seed(SEED)  # expect: PFL404
            np.random.seed(SEED)
    """,
    # One finding for the file's seeding: that of torch's generator, which the DataLoader's workers are seeded from.
    "torch-seeding-reported-once": """
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)  # expect: PFL404
        torch.manual_seed(args.seed + 1)
    """,
    "local-constant": """
        def main():
            seed = 7
            torch.manual_seed(seed)  # expect: PFL404
    """,
    # The same value on every rank without being a literal: a configured seed, and what is given one.
    "seed-from-arguments": """
        torch.manual_seed(args.seed)  # expect: PFL404
    """,
    "configured-seed-attribute": """
        random.seed(cfg.SEED)  # expect: PFL404
    """,
    "configured-seed-key": """
        np.random.seed(config["seed"])  # expect: PFL404
    """,
    "configured-seed-converted-and-offset": """
        torch.manual_seed(int(cfg.TRAIN.seed) + 1)  # expect: PFL404
    """,
    "variable-given-the-configured-seed": """
        def main(args):
            seed = args.seed
            torch.manual_seed(seed)  # expect: PFL404
    """,
    "parameter-given-the-configured-seed": """
        def train(model, seed):
            torch.manual_seed(seed)  # expect: PFL404
        train(None, args.seed)
        train(None, seed=7)
    """,
    # Global seeding through a helper of the file: reported where it is called, with the value given.
    "helper-of-the-file": """
        def fix_random_seeds(seed=31):
            torch.manual_seed(seed)
            torch.cuda.manual_seed_all(seed)
            np.random.seed(seed)
        fix_random_seeds(args.seed)  # expect: PFL404
    """,
    "helper-of-the-file-with-its-default": """
        def seed_everything(seed=31):
            random.seed(seed)
            torch.manual_seed(seed)
        seed_everything()  # expect: PFL404
    """,
    # Library seeders that seed every rank alike.
    "transformers-seeder": """
        import transformers
        transformers.set_seed(args.seed)  # expect: PFL404
    """,
    "accelerate-seeder": """
        from accelerate.utils import set_seed
        set_seed(42, device_specific=False)  # expect: PFL404
    """,
    "mmengine-seeder": """
        from mmengine.runner import set_random_seed
        set_random_seed(cfg.seed, deterministic=True)  # expect: PFL404
    """,
    "timm-seeder-without-the-rank": """
        from timm.utils import random_seed
        random_seed(42)  # expect: PFL404
    """,
    # Not flagged: not the same on every rank as far as the file tells, not the global generator, or seeded per rank
    # somewhere.
    "parameter-given-the-rank": """
        def train(seed):
            torch.manual_seed(seed)
        train(rank)
        torch.manual_seed(args.seed)  # expect: PFL404
    """,
    "parameter-never-given-here": """
        def train(seed):
            torch.manual_seed(seed)
        torch.manual_seed(args.seed)  # expect: PFL404
    """,
    "seed-computed-at-run-time": """
        import time
        torch.manual_seed(time.time_ns())
        random.seed(args.base + 1)
        torch.manual_seed(args.seed)  # expect: PFL404
    """,
    "configured-seed-plus-the-rank-in-place": """
        args.seed += dist.get_rank()
        torch.manual_seed(args.seed)
        torch.manual_seed(0)
    """,
    "seed-variable-from-the-configured-seed-and-the-rank": """
        import utils
        seed = args.seed + utils.get_rank()
        torch.manual_seed(seed)
    """,
    "helper-adding-the-rank-itself": """
        def set_seed(seed):
            seed += dist.get_rank()
            torch.manual_seed(seed)
        set_seed(args.seed)
        torch.manual_seed(0)
    """,
    "helper-given-the-rank": """
        def seed_all_rng(seed):
            torch.manual_seed(seed)
            random.seed(seed)
        seed_all_rng(args.seed + rank)
        torch.manual_seed(0)
    """,
    "library-seeders-adding-the-rank": """
        from accelerate.utils import set_seed
        set_seed(args.seed, device_specific=True)
        torch.manual_seed(0)
    """,
    "mmengine-seeder-adding-the-rank": """
        from mmengine.runner import set_random_seed
        set_random_seed(cfg.seed, False, True)
        torch.manual_seed(0)
    """,
    "timm-seeder-given-the-rank": """
        from timm.utils import random_seed
        random_seed(args.seed, args.rank)
        torch.manual_seed(0)
    """,
    "torchtune-seeder-adds-the-rank-itself": """
        from torchtune import training
        training.set_seed(seed=args.seed)
        torch.manual_seed(0)
    """,
    "cuda-generator": """
        torch.cuda.manual_seed_all(0)
    """,
    "rank-added-in-another-call": """
        torch.manual_seed(0)
        def seed_data(seed):
            random.seed(seed + rank)
    """,
    "rank-added-in-a-seed-variable": """
        torch.manual_seed(0)
        data_seed = 1234 + dist.get_rank()
    """,
    "helper-seeding-with-the-rank": """
        torch.manual_seed(0)
        set_seed(args.seed, rank=rank)
    """,
    "worker-init-fn": """
        torch.manual_seed(0)
        loader = DataLoader(dataset, worker_init_fn=seed_worker)
    """,
    "generator": """
        torch.manual_seed(0)
        loader = DataLoader(dataset, generator=torch.Generator().manual_seed(rank))
    """,
    "seeded-in-the-process-that-spawns-the-ranks": """
        import torch.multiprocessing as mp
        def worker(index, args):
            pass
        def main(args):
            torch.manual_seed(args.seed)
            mp.spawn(worker, nprocs=2, args=(args,))
        if __name__ == "__main__":
            random.seed(0)
            mp.spawn(worker, nprocs=2, args=(None,))
    """,
    "seeded-in-the-spawned-ranks": """
        import torch.multiprocessing as mp
        def worker(index, args):
            torch.manual_seed(args.seed)  # expect: PFL404
        def main(args):
            mp.spawn(worker, nprocs=2, args=(args,))
    """,
    "tensor-parallel-ranks-need-one-seed": """
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (2,))
        torch.manual_seed(0)
    """,
}


@pytest.mark.parametrize("name", SAMPLER_CASES)
def test_sampler_seed(name: str) -> None:
    assert_marks(DDP_SETUP + dedent(SAMPLER_CASES[name]))


@pytest.mark.parametrize("name", GLOBAL_SEED_CASES)
def test_global_seed_with_random_augmentation(name: str) -> None:
    assert_marks(DDP_SETUP + AUGMENTATION + dedent(GLOBAL_SEED_CASES[name]))


@pytest.mark.parametrize(
    "augmentation",
    [
        "import torchvision.transforms as T\naug = T.RandomHorizontalFlip()\n",
        "from torchvision.transforms import v2\naug = v2.RandAugment()\n",
        "from torchvision.transforms import ColorJitter\naug = ColorJitter(0.4)\n",
        "import albumentations as A\n",
        "import kornia.augmentation as K\n",
    ],
)
def test_random_augmentation_is_recognised(augmentation: str) -> None:
    assert_marks(DDP_SETUP + augmentation + "torch.manual_seed(0)  # expect: PFL404\n")


@pytest.mark.parametrize(
    "source",
    [
        # No random augmentation in the file: only deterministic transforms.
        DDP_SETUP + "aug = transforms.Compose([transforms.Resize(256), transforms.ToTensor()])\ntorch.manual_seed(0)\n",
        # Not a distributed script.
        "import torch\nfrom torchvision import transforms\naug = transforms.RandomCrop(32)\ntorch.manual_seed(0)\n",
        # Lightning seeds its workers per rank itself.
        DDP_SETUP + AUGMENTATION + "import lightning as L\ntorch.manual_seed(0)\n",
        # One process that only copies torchrun's variable into its arguments (a JAX script that shards on devices).
        "import os\nimport torch\nfrom torchvision import transforms\nlocal_rank = int(os.environ.get('LOCAL_RANK', -1))\n"
        "aug = transforms.RandomCrop(32)\ntorch.manual_seed(0)\n",
    ],
)
def test_global_seed_not_flagged(source: str) -> None:
    assert_marks(source)


def test_a_distributed_sampler_is_enough_to_tell_several_ranks_load_data() -> None:
    assert_marks(
        "import os\nimport torch\nfrom torch.utils.data import DistributedSampler\nfrom torchvision import transforms\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\naug = transforms.RandomCrop(32)\nsampler = DistributedSampler(data)\n"
        "torch.manual_seed(0)  # expect: PFL404\n"
    )


UTILS = """
    import random
    import numpy as np
    import torch


    def fix_random_seeds(seed=31):
        torch.manual_seed(seed)
        torch.cuda.manual_seed_all(seed)
        np.random.seed(seed)


    def seed_per_rank(seed):
        seed += torch.distributed.get_rank()
        torch.manual_seed(seed)
        random.seed(seed)
"""

# Scripts that seed through a helper of another module, and augment at random in their own code.
HELPER_PROJECT = {
    "utils.py": UTILS,
    "main_helper.py": """
        import torch.distributed as dist
        from torchvision import transforms

        import utils


        def main(args):
            dist.init_process_group("nccl")
            utils.fix_random_seeds(args.seed)
            return transforms.RandomResizedCrop(224)
    """,
    # Through an alias without `seed` in it, with a literal.
    "main_alias.py": """
        import torch.distributed as dist
        from torchvision import transforms

        from utils import fix_random_seeds as fix

        dist.init_process_group("nccl")
        fix(0)
        augment = transforms.RandomHorizontalFlip()
    """,
    # Quiet: the helper adds the rank itself, which a later literal seed does not undo for the data's seeds.
    "main_per_rank.py": """
        import torch
        import torch.distributed as dist
        from torchvision import transforms

        import utils

        dist.init_process_group("nccl")
        utils.seed_per_rank(42)
        torch.manual_seed(0)
        augment = transforms.RandomHorizontalFlip()
    """,
    # Quiet: the rank is added where the helper is called.
    "main_seed_plus_rank.py": """
        import torch.distributed as dist
        from torchvision import transforms

        import utils

        dist.init_process_group("nccl")
        utils.fix_random_seeds(1 + dist.get_rank())
        augment = transforms.RandomHorizontalFlip()
    """,
}


def _pfl404(document: dict) -> list[dict]:
    return [d for d in document["diagnostics"] if d["code"] == "PFL404"]


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("")
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(dedent(source).lstrip())


def _checked(root: Path) -> list[dict]:
    """The project's PFL404 findings, each file checked alone (as pre-commit does) getting the same."""
    whole = _pfl404(check("--no-cache", cwd=root))
    for path in sorted({d["path"] for d in whole}):
        assert _pfl404(check("--no-cache", path, cwd=root)) == [d for d in whole if d["path"] == path]
    return whole


def test_seeding_helpers_of_another_module(tmp_path: Path) -> None:
    _write(tmp_path, HELPER_PROJECT)
    whole = _checked(tmp_path)
    assert {(d["path"], d["line"]) for d in whole} == {("main_helper.py", 9), ("main_alias.py", 7)}
    (helper,) = [d for d in whole if d["path"] == "main_helper.py"]
    assert helper["message"] == (
        "`utils.fix_random_seeds(args.seed)` gives every rank the same random stream (which seeds the global "
        "generators with its `seed` at utils.py:6), so random augmentation and the DataLoader workers' seeds repeat "
        "across ranks; add the rank to the seed used for data, e.g. `seed + rank`"
    )
    assert helper["related"] == [{"path": "utils.py", "line": 6, "message": "which seeds the global generators with its `seed`"}]


def test_a_cached_finding_goes_when_the_helper_starts_adding_the_rank(tmp_path: Path) -> None:
    _write(tmp_path, {name: HELPER_PROJECT[name] for name in ("utils.py", "main_helper.py")})
    assert [(d["path"], d["line"]) for d in _pfl404(check("main_helper.py", cwd=tmp_path))] == [("main_helper.py", 9)]
    helper = tmp_path / "utils.py"
    helper.write_text(helper.read_text().replace("def fix_random_seeds(seed=31):\n", "def fix_random_seeds(seed=31):\n    seed += torch.distributed.get_rank()\n"))
    assert _pfl404(check("main_helper.py", cwd=tmp_path)) == []


# Scripts whose DataLoader gets its dataset, or the dataset its transform, from a class or function of another module.
DATASET_PROJECT = {
    "utils.py": UTILS,
    "data/multicrop.py": """
        import torchvision.transforms as transforms
        from torchvision import datasets


        class MultiCropDataset(datasets.ImageFolder):
            def __init__(self, path, size):
                super().__init__(path)
                self.trans = transforms.Compose([transforms.RandomResizedCrop(size), transforms.ToTensor()])


        class CenterCropDataset(datasets.ImageFolder):
            def __init__(self, path, size):
                super().__init__(path)
                self.trans = transforms.Compose([transforms.CenterCrop(size), transforms.ToTensor()])
    """,
    "augment.py": """
        from torchvision import transforms


        def color_distortion(s=1.0):
            return transforms.RandomApply([transforms.ColorJitter(0.8 * s, 0.8 * s, 0.8 * s, 0.2 * s)], p=0.8)


        class Augmentation:
            def __init__(self):
                self.distort = color_distortion()

            def __call__(self, image):
                return self.distort(image)
    """,
    "flips.py": """
        import albumentations as A


        def build():
            return A.Compose([A.HorizontalFlip(), A.Normalize()])
    """,
    # SwAV's shape: seeded alike through the helper, augmented by the dataset class of another module.
    "main_swav.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        import utils
        from data.multicrop import MultiCropDataset


        def main(args):
            dist.init_process_group("nccl")
            utils.fix_random_seeds(args.seed)
            dataset = MultiCropDataset(args.data, 224)
            return DataLoader(dataset, sampler=DistributedSampler(dataset))
    """,
    # The transform given to the dataset is a project class that calls a project function.
    "main_transform.py": """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torchvision import datasets

        from augment import Augmentation

        dist.init_process_group("nccl")
        torch.manual_seed(0)
        loader = DataLoader(datasets.ImageFolder("data", transform=Augmentation()))
    """,
    # albumentations, built by a function of another module, through two local variables.
    "main_albumentations.py": """
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torchvision import datasets

        from flips import build


        def main(cfg):
            dist.init_process_group("nccl")
            torch.manual_seed(cfg.SEED)
            transform = build()
            train = datasets.ImageFolder(cfg.data, transform=transform)
            return DataLoader(train)
    """,
    # Quiet: the dataset class used is deterministic (its module's other class is not).
    "main_center_crop.py": """
        import torch.distributed as dist
        from torch.utils.data import DataLoader

        import utils
        from data.multicrop import CenterCropDataset

        dist.init_process_group("nccl")
        utils.fix_random_seeds(1)
        loader = DataLoader(CenterCropDataset("data", 224))
    """,
}


def test_random_augmentation_of_another_module(tmp_path: Path) -> None:
    _write(tmp_path, DATASET_PROJECT)
    whole = _checked(tmp_path)
    assert {(d["path"], d["line"]) for d in whole} == {("main_swav.py", 10), ("main_transform.py", 9), ("main_albumentations.py", 11)}
    (swav,) = [d for d in whole if d["path"] == "main_swav.py"]
    assert swav["message"] == (
        "`utils.fix_random_seeds(args.seed)` gives every rank the same random stream (which seeds the global "
        "generators with its `seed` at utils.py:6), so random augmentation (RandomResizedCrop at data/multicrop.py:8) "
        "and the DataLoader workers' seeds repeat across ranks; add the rank to the seed used for data, e.g. `seed + rank`"
    )
    assert swav["related"] == [
        {"path": "utils.py", "line": 6, "message": "which seeds the global generators with its `seed`"},
        {"path": "data/multicrop.py", "line": 8, "message": "RandomResizedCrop"},
    ]
