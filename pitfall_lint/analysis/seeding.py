"""Global seeding and random augmentation: what seeds the generators the DataLoader workers draw from, and with what.

Shared by the file summary (a project function that seeds them with its parameter: `utils.fix_random_seeds(seed)`)
and PFL404, which reads the calls of such helpers and of the libraries' seeders.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from pitfall_lint.analysis.ranks import depends_on_rank
from pitfall_lint.analysis.scopes import enclosing_function
from pitfall_lint.context import FileContext

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

# How a summary tells a helper's seeding: with a parameter as given (the caller's value on every rank), or with a
# value that depends on the rank (the helper seeds per rank whatever it is given).
AS_GIVEN, PER_RANK = "as-given", "per-rank"

# torchvision transforms that draw at random without `Random` in their name.
RANDOM_TRANSFORMS = frozenset(
    {"ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix", "GaussianBlur", "ElasticTransform"}
)
TORCHVISION_TRANSFORMS = "torchvision.transforms"

# Every transform of these libraries draws at random (a flip with p=0.5 ...) but these, which only reshape or convert.
_AUGMENTATION_LIBRARIES = ("albumentations.", "kornia.augmentation.")
_DETERMINISTIC = frozenset(
    {
        "Compose", "Normalize", "Resize", "CenterCrop", "PadIfNeeded", "LongestMaxSize", "SmallestMaxSize", "ToTensorV2",
        "ToFloat", "FromFloat", "Crop", "Denormalize", "PadTo", "AugmentationSequential",
    }
)


def is_random_transform(qualified: str) -> bool:
    """A call that builds a transform drawing at random: torchvision's `Random*` (and ColorJitter, RandAugment, ...),
    or one of albumentations' or kornia.augmentation's that does more than resize, crop the centre or convert."""
    head, _, last = qualified.rpartition(".")
    if head.startswith(TORCHVISION_TRANSFORMS):
        return last.startswith("Random") or last in RANDOM_TRANSFORMS
    return qualified.startswith(_AUGMENTATION_LIBRARIES) and last not in _DETERMINISTIC


def helper_seeding(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> tuple[str, str, int] | None:
    """For a global seeder's call in a module-level function: (PER_RANK, "", -1) when it seeds with a value that
    depends on the rank, (AS_GIVEN, parameter, position) when with a parameter the function never rebinds (position
    -1 for a keyword-only one); None otherwise (a computed seed: nothing can be told)."""
    function = enclosing_function(ancestors)
    if len(call.args) != 1 or call.keywords or len(ancestors) < 2 or ancestors[1] is not function:
        return None  # only a module-level function's own call: what a call of it elsewhere can be read against
    seed = call.args[0]
    if depends_on_rank(ctx, seed, ancestors) or _rebound_with_rank(ctx, function, seed):
        return PER_RANK, "", -1
    if not isinstance(seed, ast.Name) or _rebinds(function, seed.id):
        return None
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if seed.id in positional:
        return AS_GIVEN, seed.id, positional.index(seed.id)
    if seed.id in {a.arg for a in function.args.kwonlyargs}:
        return AS_GIVEN, seed.id, -1
    return None


def _rebinds(function: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(function))


def _rebound_with_rank(ctx: FileContext, function: ast.AST, seed: ast.expr) -> bool:
    """`seed += dist.get_rank()` (or `seed = seed + rank`) before the seeder reads `seed`."""
    if not isinstance(seed, ast.Name):
        return False
    for node in ast.walk(function):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == seed.id for t in targets) and depends_on_rank(ctx, node.value, [ctx.tree, function]):
            return True
    return False
