"""PFL404 rank-seeding: rank-dependent DistributedSampler seeds, and one constant seed for random augmentation."""

from __future__ import annotations

from textwrap import dedent

import pytest

from marks import assert_marks

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
            np.random.seed(SEED)  # expect: PFL404
    """,
    "local-constant": """
        def main():
            seed = 7
            torch.manual_seed(seed)  # expect: PFL404
    """,
    # Not flagged: not a constant, not the global generator, or seeded per rank somewhere.
    "seed-from-arguments": """
        torch.manual_seed(args.seed)
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
    ],
)
def test_global_seed_not_flagged(source: str) -> None:
    assert_marks(source)
