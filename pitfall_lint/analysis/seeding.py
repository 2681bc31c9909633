"""Global seeding and random augmentation: what seeds the generators the DataLoader workers draw from, and which
transforms draw from them."""

from __future__ import annotations

# The generators of the process: the DataLoader draws its workers' base seed from torch's, and a forked worker starts
# from numpy's and random's state. (CUDA's generators feed neither.)
GLOBAL_SEEDERS = frozenset({"torch.manual_seed", "random.seed", "numpy.random.seed", "torch.random.manual_seed"})

# Library helpers that seed torch, numpy and random with the value given, the same on every rank, unless the option
# named (keyword, position) is given: then they add the rank themselves. (Lightning's `seed_everything` is met only
# in files that Lightning runs, which PFL404 leaves alone.)
LIBRARY_SEEDERS: dict[str, tuple[str, int] | None] = {
    "transformers.set_seed": None,
    "transformers.trainer_utils.set_seed": None,
    "accelerate.utils.set_seed": ("device_specific", 1),
    "accelerate.utils.random.set_seed": ("device_specific", 1),
    "mmengine.runner.set_random_seed": ("diff_rank_seed", 2),
    "mmengine.runner.utils.set_random_seed": ("diff_rank_seed", 2),
    "mmcv.runner.set_random_seed": ("use_rank_shift", 2),
    "mmcv.runner.utils.set_random_seed": ("use_rank_shift", 2),
    "ignite.utils.manual_seed": None,
    "torchtnt.utils.seed": None,
    "torchtnt.utils.env.seed": None,
    "timm.utils.random_seed": ("rank", 1),
    "timm.utils.random.random_seed": ("rank", 1),
}
# Library helpers that always add the rank: torchtune's "seed + rank".
RANK_ADDING_SEEDERS = frozenset({"torchtune.training.set_seed", "torchtune.training.seed.set_seed", "torchtune.utils.set_seed"})
LIBRARY_SEED_PARAMETER = ("seed", 0)

# torchvision transforms that draw at random without `Random` in their name.
RANDOM_TRANSFORMS = frozenset(
    {"ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix", "GaussianBlur", "ElasticTransform"}
)
TORCHVISION_TRANSFORMS = "torchvision.transforms"


def is_random_transform(qualified: str) -> bool:
    """A call that builds a transform drawing at random: torchvision's `Random*` (and ColorJitter, RandAugment, ...)."""
    head, _, last = qualified.rpartition(".")
    return head.startswith(TORCHVISION_TRANSFORMS) and (last.startswith("Random") or last in RANDOM_TRANSFORMS)
