"""PFL404: seeds that differ per rank where they must agree, or agree where augmentation needs them to differ."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.distributed import NON_LIGHTNING_DISTRIBUTED_TRIGGERS, sets_up_distributed
from pitfall_lint.analysis.ranks import ancestors_of, depends_on_rank
from pitfall_lint.analysis.samplers import (
    DISTRIBUTED_SAMPLERS,
    SAMPLER_POSITIONS,
    call_argument,
    uses_loader_framework,
)
from pitfall_lint.analysis.scopes import enclosing_function, local_value, module_assignments, statements_in
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

_GLOBAL_SEEDERS = frozenset({"torch.manual_seed", "random.seed", "numpy.random.seed", "torch.random.manual_seed"})
# Random augmentation: torchvision's Random* transforms and the policies that draw at random.
_RANDOM_TRANSFORMS = frozenset(
    {"ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix", "GaussianBlur", "ElasticTransform"}
)
_AUGMENTATION_MODULES = ("albumentations", "kornia.augmentation", "torchvision.transforms")
_SEED_WORD = re.compile(r"seed", re.IGNORECASE)
_SHARED_DATA_CALLS = frozenset({"init_device_mesh", "DeviceMesh", "parallelize_module", "context_parallel"})


class RankSeeding(Rule):
    info = RuleInfo(
        code="PFL404",
        name="rank-seeding",
        summary="A rank-dependent DistributedSampler seed (ranks overlap), or one constant seed for random augmentation on every rank.",
        severity="warning",
        verifiable=True,
    )
    # (a) needs the sampler (its seed may be positional); (b) a seeding call in a distributed file.
    triggers = (
        ("seed", "DistributedSampler"),
        ("DistributedSampler", *NON_LIGHTNING_DISTRIBUTED_TRIGGERS),
    )
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._global_seeds: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        qualified = self.ctx.qualified_name(node.func)
        if qualified in DISTRIBUTED_SAMPLERS:
            seed = call_argument(node, "seed", SAMPLER_POSITIONS["seed"])
            if seed is not None and depends_on_rank(self.ctx, seed, self.ctx.ancestors):
                self.report(
                    node,
                    f"`DistributedSampler` seeded with the rank (`seed={ast.unparse(seed)}`): each rank shuffles "
                    f"differently, so the ranks' shards overlap and some samples are never seen; use one seed on "
                    f"every rank",
                )
        elif qualified in _GLOBAL_SEEDERS and len(node.args) == 1 and not node.keywords:
            self._global_seeds.append((node, list(self.ctx.ancestors)))

    def finish(self) -> None:
        if not self._global_seeds or not sets_up_distributed(self.ctx) or uses_loader_framework(self.ctx):
            return
        if not self._augments_at_random() or self._seeds_per_rank() or self._shares_data_across_ranks():
            return
        for call, ancestors in self._global_seeds:
            if _constant_seed(self.ctx, call.args[0], ancestors):
                self.report(
                    call,
                    f"`{ast.unparse(call)}` gives every rank the same random stream, so random augmentation (and the "
                    f"DataLoader workers' seeds) repeat across ranks; add the rank to the seed used for data, "
                    f"e.g. `seed + rank`",
                )

    def _augments_at_random(self) -> bool:
        """A torchvision Random* transform (or another random policy) is used in this file."""
        imports = [s for s in statements_in(self.ctx.tree) if isinstance(s, (ast.Import, ast.ImportFrom))]
        for statement in imports:
            module = statement.module if isinstance(statement, ast.ImportFrom) else None
            names = [module or ""] if module else [a.name for a in statement.names]
            if any(n.startswith(_AUGMENTATION_MODULES[:2]) for n in names):
                return True
        data = self.ctx.text.data  # every name of torchvision's transforms resolves through an import of it
        if data.isascii() and b"torchvision" not in data:
            return False
        aliases = {alias.asname for statement in imports for alias in statement.names if alias.asname}
        for node in ast.walk(self.ctx.tree):
            if not isinstance(node, ast.Call):
                continue
            spelled = _call_name(node)
            if not (spelled.startswith("Random") or spelled in _RANDOM_TRANSFORMS or spelled in aliases):
                continue  # the cheap look first: the transform's own name, or an alias an import gave it
            qualified = self.ctx.qualified_name(node.func, ancestors_of(self.ctx, node)) or ""
            head, _, last = qualified.rpartition(".")
            if head.startswith(_AUGMENTATION_MODULES[2]) and (last.startswith("Random") or last in _RANDOM_TRANSFORMS):
                return True
        return False

    def _shares_data_across_ranks(self) -> bool:
        """Tensor or context parallelism: ranks of one group must draw the same batch, so one seed is right."""
        return any(
            isinstance(node, ast.Call) and _call_name(node) in _SHARED_DATA_CALLS for node in ast.walk(self.ctx.tree)
        )

    def _seeds_per_rank(self) -> bool:
        """Anything in the file that makes a seed depend on the rank, or reseeds the DataLoader workers."""
        for node in ast.walk(self.ctx.tree):
            if isinstance(node, ast.keyword) and node.arg in ("worker_init_fn", "generator"):
                return True
            if isinstance(node, ast.Call):
                if _SEED_WORD.search(_call_name(node)) and any(
                    depends_on_rank(self.ctx, a, ancestors_of(self.ctx, node)) for a in [*node.args, *(k.value for k in node.keywords)]
                ):
                    return True
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_SEED_WORD.search(ast.unparse(t)) for t in targets) and depends_on_rank(self.ctx, node.value, ancestors_of(self.ctx, node)):
                    return True
        return False


def _call_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _constant_seed(ctx: FileContext, seed: ast.expr, ancestors: Sequence[ast.AST]) -> bool:
    """An integer literal, or a name whose value is one (`SEED = 42`)."""
    if isinstance(seed, ast.Constant):
        return isinstance(seed.value, int)
    if isinstance(seed, ast.Name):
        value = local_value(seed.id, enclosing_function(ancestors), seed.lineno)
        if value is None:
            assignments = module_assignments(ctx.tree).get(seed.id)
            value = assignments[-1].value if assignments else None
        return isinstance(value, ast.Constant) and isinstance(value.value, int)
    return False
