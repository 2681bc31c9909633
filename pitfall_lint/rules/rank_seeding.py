"""PFL404: seeds that differ per rank where they must agree, or agree where augmentation needs them to differ."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pitfall_lint.analysis.distributed import NON_LIGHTNING_DISTRIBUTED_TRIGGERS, SPAWNERS, starts_process_group
from pitfall_lint.analysis.evidence import cite, snippet
from pitfall_lint.analysis.ranks import ancestors_of, depends_on_rank
from pitfall_lint.analysis.samplers import (
    DISTRIBUTED_SAMPLERS,
    SAMPLER_POSITIONS,
    call_argument,
    call_sites,
    has_unpacked_arguments,
    is_constant,
    is_data_loader,
    uses_loader_framework,
)
from pitfall_lint.analysis.scopes import enclosing_function, is_main_guard, local_value, module_assignments, statements_in
from pitfall_lint.analysis.seeding import (
    GLOBAL_SEEDERS,
    LIBRARY_SEED_PARAMETER,
    LIBRARY_SEEDERS,
    PER_RANK,
    RANDOM_TRANSFORMS,
    RANK_ADDING_SEEDERS,
    TORCHVISION_TRANSFORMS,
    is_random_transform,
)
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule
from pitfall_lint.traversal import nodes_of

if TYPE_CHECKING:
    from pitfall_lint.project.model import Evidence

_AUGMENTATION_IMPORTS = ("albumentations", "kornia.augmentation")  # every name of theirs draws at random, or nearly
_MAX_TRACE = 3  # assignments and arguments followed back from a seed or a dataset
_SEED_WORD = re.compile(r"seed", re.IGNORECASE)
_OTHER_GENERATORS = frozenset({"random.seed", "numpy.random.seed"})
_SHARED_DATA_CALLS = frozenset({"init_device_mesh", "DeviceMesh", "parallelize_module", "context_parallel"})


class RankSeeding(Rule):
    info = RuleInfo(
        code="PFL404",
        name="rank-seeding",
        summary="A rank-dependent DistributedSampler seed (ranks overlap), or one seed for random augmentation on every rank.",
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
        self._global_seeds: list[_Seeding] = []
        self._helper_calls: list[tuple[ast.Call, str, list[ast.AST]]] = []  # calls of what may be a project seeder
        self._library_seeds_per_rank = False  # a library seeder that adds the rank was called
        self._shards_data = False  # a DistributedSampler gives each rank its part of the data

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        qualified = self.ctx.qualified_name(node.func)
        if qualified in DISTRIBUTED_SAMPLERS:
            self._shards_data = True
            seed = call_argument(node, "seed", SAMPLER_POSITIONS["seed"])
            if seed is not None and depends_on_rank(self.ctx, seed, self.ctx.ancestors):
                self.report(
                    node,
                    f"`DistributedSampler` seeded with the rank (`seed={ast.unparse(seed)}`): each rank shuffles "
                    f"differently, so the ranks' shards overlap and some samples are never seen; use one seed on "
                    f"every rank",
                )
        elif qualified in GLOBAL_SEEDERS and len(node.args) == 1 and not node.keywords:
            self._global_seeds.append(_Seeding(node, node.args[0], list(self.ctx.ancestors), seeds_torch=qualified not in _OTHER_GENERATORS))
        elif qualified in RANK_ADDING_SEEDERS:
            self._library_seeds_per_rank = True
        elif qualified in LIBRARY_SEEDERS:
            option = LIBRARY_SEEDERS[qualified]
            chosen = call_argument(node, *option) if option is not None else None
            if chosen is not None and not is_constant(chosen, False):
                self._library_seeds_per_rank = True  # `set_seed(seed, device_specific=True)` adds the rank
            elif not has_unpacked_arguments(node):
                self._global_seeds.append(_Seeding(node, call_argument(node, *LIBRARY_SEED_PARAMETER), list(self.ctx.ancestors)))
        elif qualified is not None and _SEED_WORD.search(qualified.rpartition(".")[2]):
            self._helper_calls.append((node, qualified, list(self.ctx.ancestors)))

    def finish(self) -> None:
        if not (self._global_seeds or self._helper_calls) or self._library_seeds_per_rank:
            return
        if not (self._shards_data or starts_process_group(self.ctx)) or uses_loader_framework(self.ctx):
            return
        if self._seeds_per_rank() or self._shares_data_across_ranks():
            return
        helpers = self._helper_seedings()
        if any(seeding.per_rank for seeding in helpers):
            return
        # A helper of this file is reported where it is called, with the value given, not at its own seeding call.
        called = {seeding.helper[1] for seeding in helpers if seeding.helper and os.path.abspath(seeding.helper[0]) == os.path.abspath(self.ctx.path)}
        seedings = [s for s in self._global_seeds if getattr(enclosing_function(s.ancestors), "lineno", None) not in called] + helpers
        shared = [
            s for s in seedings
            if (s.seed is None or self._same_on_every_rank(s.seed, s.ancestors)) and not self._seeds_before_spawning(s.ancestors)
        ]
        if not shared:
            return
        augmentation: Evidence | None = [] if self._augments_at_random() else self._loader_augmentation()
        if augmentation is None:
            return
        augmented, augmented_at = cite(self.ctx, augmentation, augmentation[2] if augmentation else "")
        # One finding for the file's one mistake: the seeding of torch's generator, which the DataLoader draws its
        # workers' seeds from, else the first.
        seeding = min(shared, key=lambda s: (not s.seeds_torch, s.call.lineno, s.call.col_offset))
        helper, helper_at = cite(self.ctx, seeding.helper, f"which seeds the global generators with its `{seeding.parameter}`")
        self.report(
            seeding.call,
            f"`{snippet(seeding.call)}` gives every rank the same random stream{helper}, so random augmentation"
            f"{augmented} and the DataLoader workers' seeds repeat across ranks; add the rank to the seed used for "
            f"data, e.g. `seed + rank`",
            related=helper_at + augmented_at,
        )

    def _seeds_before_spawning(self, ancestors: Sequence[ast.AST]) -> bool:
        """Seeding in the function (or the `__main__` block) that then starts the ranks with `mp.spawn`: they start
        afresh, unseeded. (Module-level code outside that block runs again in each of them.)"""
        data = self.ctx.text.data
        if data.isascii() and b"spawn" not in data and b"start_processes" not in data:
            return False
        scope = enclosing_function(ancestors) or next((a for a in ancestors if isinstance(a, ast.If) and is_main_guard(a.test)), None)
        return scope is not None and any(
            isinstance(node, ast.Call) and self.ctx.qualified_name(node.func, ancestors_of(self.ctx, node)) in SPAWNERS
            for node in ast.walk(scope)
        )

    def _helper_seedings(self) -> list[_Seeding]:
        """The calls of project functions that seed the global generators: with the argument given for the parameter
        they seed with (None: its default, fixed where the function is defined), or per rank."""
        found = []
        for call, ref, ancestors in self._helper_calls:
            answer = self.ctx.project.seeding_helper(ref)
            if answer is None or has_unpacked_arguments(call):
                continue
            if answer[0] == PER_RANK:
                found.append(_Seeding(call, None, ancestors, per_rank=True))
                continue
            _, parameter, position, path, line = answer
            seed = call_argument(call, parameter, position if position >= 0 else None)
            found.append(_Seeding(call, seed, ancestors, helper=[path, line], parameter=parameter))
        return found

    def _augments_at_random(self) -> bool:
        """A torchvision Random* transform (or another random policy) is used in this file."""
        imports = [s for s in statements_in(self.ctx.tree) if isinstance(s, (ast.Import, ast.ImportFrom))]
        for statement in imports:
            module = statement.module if isinstance(statement, ast.ImportFrom) else None
            names = [module or ""] if module else [a.name for a in statement.names]
            if any(n.startswith(_AUGMENTATION_IMPORTS) for n in names):
                return True
        data = self.ctx.text.data  # every name of torchvision's transforms resolves through an import of it
        if data.isascii() and b"torchvision" not in data:
            return False
        aliases = {alias.asname for statement in imports for alias in statement.names if alias.asname}
        for node in nodes_of(self.ctx.tree, (ast.Call,)):
            spelled = _call_name(node)  # type: ignore[arg-type]
            if not (spelled.startswith("Random") or spelled in RANDOM_TRANSFORMS or spelled in aliases):
                continue  # the cheap look first: the transform's own name, or an alias an import gave it
            qualified = self.ctx.qualified_name(node.func, ancestors_of(self.ctx, node)) or ""
            if qualified.startswith(TORCHVISION_TRANSFORMS) and is_random_transform(qualified):
                return True
        return False

    def _loader_augmentation(self) -> Evidence | None:
        """Where a project class or function that builds a DataLoader's dataset (or its transform) draws random
        augmentation: the dataset class of another module, `transform=` a project class, through local variables."""
        for node in ast.walk(self.ctx.tree):
            if not (isinstance(node, ast.Call) and _call_name(node) == "DataLoader" and is_data_loader(self.ctx, node)):
                continue
            dataset = call_argument(node, "dataset", 0)
            for ref in self._built_by(dataset, ancestors_of(self.ctx, node)) if dataset is not None else ():
                found = self.ctx.project.random_augmentation(ref)
                if found is not None:
                    return found
        return None

    def _built_by(self, value: ast.expr, ancestors: Sequence[ast.AST], depth: int = 0) -> list[str]:
        """The names of the calls that build a value and its arguments, through a few local variables."""
        if isinstance(value, ast.Name) and depth < _MAX_TRACE:
            assigned = _assigned(self.ctx, value, ancestors)
            return self._built_by(assigned, ancestors, depth + 1) if isinstance(assigned, ast.expr) else []
        if not isinstance(value, ast.Call):
            return []
        qualified = self.ctx.qualified_name(value.func, ancestors)
        found = [qualified] if qualified is not None else []
        for argument in [*value.args, *(k.value for k in value.keywords)]:
            found += self._built_by(argument, ancestors, depth)
        return found

    def _shares_data_across_ranks(self) -> bool:
        """Tensor or context parallelism: ranks of one group must draw the same batch, so one seed is right."""
        return any(_call_name(node) in _SHARED_DATA_CALLS for node in nodes_of(self.ctx.tree, (ast.Call,)))  # type: ignore[arg-type]

    def _seeds_per_rank(self) -> bool:
        """Anything in the file that makes a seed depend on the rank, or reseeds the DataLoader workers."""
        for node in nodes_of(self.ctx.tree, (ast.keyword, ast.Call, ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if isinstance(node, ast.keyword) and node.arg in ("worker_init_fn", "generator"):
                return True
            if isinstance(node, ast.Call):
                if _SEED_WORD.search(_call_name(node)) and any(
                    depends_on_rank(self.ctx, a, ancestors_of(self.ctx, node)) for a in [*node.args, *(k.value for k in node.keywords)]
                ):
                    return True
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                # `seed = args.seed + utils.get_rank()`, `args.seed += rank`
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_SEED_WORD.search(ast.unparse(t)) for t in targets) and depends_on_rank(self.ctx, node.value, ancestors_of(self.ctx, node)):
                    return True
        return False

    def _same_on_every_rank(self, seed: ast.expr, ancestors: Sequence[ast.AST], depth: int = 0) -> bool:
        """A value no rank can see differently: an integer literal, a configured seed (`args.seed`, `cfg.SEED`,
        `config["seed"]`), sums of those, and a variable or a parameter of a same-file function given one."""
        if depth > _MAX_TRACE or depends_on_rank(self.ctx, seed, ancestors):
            return False
        if isinstance(seed, ast.Constant):
            return type(seed.value) is int
        if isinstance(seed, (ast.Attribute, ast.Subscript)):
            return _SEED_WORD.search(_key(seed)) is not None
        if isinstance(seed, ast.BinOp):
            return self._same_on_every_rank(seed.left, ancestors, depth + 1) and self._same_on_every_rank(seed.right, ancestors, depth + 1)
        if isinstance(seed, ast.Call) and _call_name(seed) == "int" and len(seed.args) == 1 and not seed.keywords:
            return self._same_on_every_rank(seed.args[0], ancestors, depth + 1)
        if not isinstance(seed, ast.Name):
            return False
        assigned = _assigned(self.ctx, seed, ancestors)
        if isinstance(assigned, ast.expr):
            return self._same_on_every_rank(assigned, ancestors, depth + 1)
        function = enclosing_function(ancestors)
        if function is None or isinstance(ancestors[ancestors.index(function) - 1], ast.ClassDef):
            return False  # a method's callers pass it through the instance: not followed
        sites = call_sites(self.ctx, function)
        positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
        position = positional.index(seed.id) if seed.id in positional else None
        given = [(call_argument(site, seed.id, position), site) for site in sites]
        return bool(given) and all(
            argument is not None and self._same_on_every_rank(argument, ancestors_of(self.ctx, site), depth + 1) for argument, site in given
        )


@dataclass
class _Seeding:
    """A call that seeds the global generators, and the value it seeds them with (None: a parameter's default)."""

    call: ast.Call
    seed: ast.expr | None
    ancestors: list[ast.AST]
    per_rank: bool = False  # a project helper that adds the rank itself
    helper: list | None = None  # [path, line] of the project helper called
    parameter: str = ""  # the helper's parameter that seeds
    seeds_torch: bool = True  # torch's generator among others (every helper and library seeder seeds it)


def _call_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _key(node: ast.Attribute | ast.Subscript) -> str:
    """`seed` of `args.seed`, `SEED` of `cfg.SEED`, `seed` of `config["seed"]`."""
    if isinstance(node, ast.Attribute):
        return node.attr
    key = node.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else ""


def _assigned(ctx: FileContext, name: ast.Name, ancestors: Sequence[ast.AST]) -> ast.AST | None:
    """The last value given to a name before its use: in its function, else at module level."""
    value = local_value(name.id, enclosing_function(ancestors), name.lineno)
    if value is None:
        assignments = module_assignments(ctx.tree).get(name.id)
        value = assignments[-1].value if assignments else None
    return value
