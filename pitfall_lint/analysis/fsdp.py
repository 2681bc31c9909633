"""FSDP2 (`fully_shard`) and DeviceMesh: which modules a scope shards and where, which names hold a sharded module,
where a device mesh is built. The FSDP2/DTensor rules (PFL6xx) ask these questions here, once per file."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import FUNCTIONS, enclosing_class, enclosing_function, exclusive_branches, statements_in
from pitfall_lint.analysis.training import dotted
from pitfall_lint.context import FileContext

# torch 2.13 spells FSDP2 in these modules: torch.distributed.fsdp (public since 2.6), its private home, and the
# torch.distributed._composable.fsdp module of 2.4-2.5 that later releases keep as an alias.
_FSDP2_MODULES = (
    "torch.distributed.fsdp",
    "torch.distributed.fsdp._fully_shard",
    "torch.distributed.fsdp._fully_shard._fully_shard",
    "torch.distributed._composable.fsdp",
    "torch.distributed._composable.fsdp.fully_shard",
)
FULLY_SHARD = frozenset(f"{module}.fully_shard" for module in _FSDP2_MODULES)
REGISTER_FORWARD_METHOD = frozenset(f"{module}.register_fsdp_forward_method" for module in _FSDP2_MODULES)
FSDP1 = frozenset(
    {
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
# `init_device_mesh` "is a collective call across World" (pytorch/pytorch#162571): it creates a process group per
# dimension with `new_group`, which every rank must enter. On torch 2.13 a one-dimensional mesh over the whole world
# reuses the default group and creates none (measured with gloo), so only a mesh of two or more dimensions is one.
_MESH_MODULES = ("torch.distributed", "torch.distributed.device_mesh", "torch.distributed.tensor", "torch.distributed._tensor")
INIT_DEVICE_MESH = frozenset(f"{module}.init_device_mesh" for module in _MESH_MODULES)
# Calls that hand the loop a module's children (`for layer in model.layers.values():`).
_CHILD_ITERATORS = frozenset({"children", "named_children", "values", "items", "modules", "named_modules"})
_LOOPS = (ast.For, ast.AsyncFor)


@dataclass(frozen=True)
class ShardSite:
    """One `fully_shard(...)` call: the modules it shards, as dotted names (`model`, `model.embed`, and
    `model.layers.*` for a loop over `model.layers` or `model.layers[i]`), and the name its result is bound to."""

    call: ast.Call
    targets: tuple[str, ...]
    bound: str | None

    @property
    def line(self) -> int:
        return self.call.lineno


def is_fully_shard(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
    return ctx.qualified_name(call.func, ancestors) in FULLY_SHARD


def mesh_dimensions(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> int | None:
    """The number of dimensions of the mesh an `init_device_mesh(device_type, mesh_shape, mesh_dim_names=...)` call
    builds, where its shape or its names are written as a literal tuple or list; None for any other call."""
    if ctx.qualified_name(call.func, ancestors) not in INIT_DEVICE_MESH:
        return None
    shape = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mesh_shape"), None)
    names = call.args[2] if len(call.args) > 2 else next((k.value for k in call.keywords if k.arg == "mesh_dim_names"), None)
    for literal in (shape, names):
        if isinstance(literal, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in literal.elts):
            return len(literal.elts)
    return None


def _loop_children(ctx: FileContext, name: str, call: ast.Call) -> str | None:
    """`model.layers.*` when `name` is the variable of an enclosing loop over `model.layers` (through `enumerate`,
    `.values()`, `.named_children()`, ...)."""
    for node in reversed(ancestors_of(ctx, call)):
        if isinstance(node, FUNCTIONS):
            return None
        if isinstance(node, _LOOPS) and name in {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}:
            iterated = node.iter
            if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Name) and iterated.func.id in ("enumerate", "reversed") and iterated.args:
                iterated = iterated.args[0]
            if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Attribute) and iterated.func.attr in _CHILD_ITERATORS:
                iterated = iterated.func.value
            owner = dotted(iterated)
            return f"{owner}.*" if owner is not None else None
    return None


def _target_names(ctx: FileContext, module: ast.AST, call: ast.Call) -> list[str]:
    if isinstance(module, (ast.List, ast.Tuple)):
        return [name for element in module.elts for name in _target_names(ctx, element, call)]
    if isinstance(module, ast.Subscript):  # `model.layers[i]`, `model.layers[-1]`
        owner = dotted(module.value)
        return [f"{owner}.*"] if owner is not None else []
    name = dotted(module)
    if name is None:
        return []
    children = _loop_children(ctx, name, call) if "." not in name else None
    return [children or name]


def shard_sites(ctx: FileContext, scope: ast.AST) -> list[ShardSite]:
    """Every `fully_shard` call of the scope's own code (a function's, or the module's), in source order."""
    key = ("fsdp-shard-sites", id(scope))
    if key not in ctx.memo:
        found = []
        if b"fully_shard" in ctx.text.data:
            chain = [scope] if not isinstance(scope, ast.Module) else []
            for statement in statements_in(scope, definitions=False):
                for node in ast.iter_child_nodes(statement):
                    if isinstance(node, ast.stmt):
                        continue
                    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                        if not is_fully_shard(ctx, call, chain):
                            continue
                        module = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "module"), None)
                        targets = tuple(_target_names(ctx, module, call)) if module is not None else ()
                        bound = None
                        if isinstance(statement, ast.Assign) and statement.value is call and len(statement.targets) == 1:
                            bound = dotted(statement.targets[0])
                        found.append(ShardSite(call, targets, bound))
        ctx.memo[key] = sorted(found, key=lambda site: (site.call.lineno, site.call.col_offset))
    return ctx.memo[key]  # type: ignore[return-value]


def sharding_scopes(ctx: FileContext, name: str, ancestors: Sequence[ast.AST]) -> tuple[list[ast.AST], bool]:
    """Where sites that shard `name` may stand, and whether only those before the use count: `self.model` is the
    class's, sharded in any of its methods; any other name is the enclosing function's (or the module's)."""
    cls = enclosing_class(ancestors)
    if name.startswith("self.") and cls is not None:
        return [m for m in cls.body if isinstance(m, FUNCTIONS)], False
    function = enclosing_function(ancestors)
    return [function if function is not None else ctx.tree], True


def sharding_of(
    ctx: FileContext, name: str, ancestors: Sequence[ast.AST], line: int, parts: bool = False, use: ast.AST | None = None
) -> ShardSite | None:
    """The `fully_shard` call that made the module `name` holds an FSDP module (`fully_shard(model)`,
    `model = fully_shard(model)`, `fully_shard([model.a, model])`), before `line` in the same function; for
    `self.<attribute>`, in any method of the class. With `parts`, a call that shards one of its submodules counts. A
    call in the other branch of an `if` than the `use` does not (`if fsdp2: fully_shard(m) else: m = FSDP(m)`)."""
    scopes, before_only = sharding_scopes(ctx, name, ancestors)
    for scope in scopes:
        for site in shard_sites(ctx, scope):
            if before_only and site.line >= line:
                break
            if name in site.targets or site.bound == name or (parts and shards_part_of(site, name)):
                if use is None or not exclusive_branches(site.call, use, ancestors_of(ctx, site.call), ancestors):
                    return site
    return None


def sites_in_scope_of(ctx: FileContext, name: str, ancestors: Sequence[ast.AST]) -> list[ShardSite]:
    """Every `fully_shard` call that may shard `name` or a part of it, where `sharding_of` looks (at any line)."""
    scopes, _ = sharding_scopes(ctx, name, ancestors)
    return [site for scope in scopes for site in shard_sites(ctx, scope)]


def shards_part_of(site: ShardSite, name: str) -> bool:
    """Whether the call shards the module `name` or one of its submodules (`model.layers.*` is part of `model`)."""
    return any(target == name or target.startswith(name + ".") for target in site.targets)


def shards_parameters_of(site: ShardSite, name: str) -> bool:
    """Whether the call replaces some of the parameters of module `name`: it shards the module, a submodule of it, or
    a module that contains it (`fully_shard(model)` shards `model.encoder`'s parameters too)."""
    return shards_part_of(site, name) or any(name.startswith(target.removesuffix("*").removesuffix(".") + ".") for target in site.targets)
