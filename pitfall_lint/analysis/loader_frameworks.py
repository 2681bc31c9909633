"""Training frameworks and the loaders they are given: which shard them per rank, which run DDP without doing so.

Lightning and Accelerate (uses_loader_framework in samplers.py) also call set_epoch; the frameworks here only
matter to whether a plain DataLoader is split between the ranks.
"""

from __future__ import annotations

import ast

from pitfall_lint.analysis.scopes import statements_on_every_path
from pitfall_lint.context import FileContext

# Each rebuilds the loaders it is handed with a sampler over the ranks: catalyst's runners hand them to the
# engine's `prepare` (an accelerate Accelerator since 22.02, `DistributedSampler` before); Ray Train's
# `prepare_data_loader` adds a DistributedSampler; fastai's `distrib_ctx`/`to_distributed` wrap them in a
# DistributedDL (or accelerate's `prepare`).
_SHARDING_ROOTS = {"catalyst": "catalyst's runner"}
_SHARDING_CALLS = {
    "ray.train.torch.prepare_data_loader": "Ray Train's prepare_data_loader",
    "ray.train.torch.train_loop_utils.prepare_data_loader": "Ray Train's prepare_data_loader",
}
_FASTAI_DISTRIBUTED = frozenset({"distrib_ctx", "to_distributed"})
# Opacus's PrivacyEngine replaces the loader it is given by a DPDataLoader whose Poisson sampler draws each rank's
# own batches when the module is distributed (poisson_sampling=True is the default).
_OPACUS_PRIVATE = frozenset({"make_private", "make_private_with_epsilon"})
_ACCELERATORS = ("accelerate.Accelerator", "accelerate.accelerator.Accelerator")
# torchtnt's units run DDP or FSDP by `strategy=`, but never add a sampler (they only call set_epoch on one).
_TORCHTNT_STRATEGIES = frozenset({"ddp", "fsdp", "fsdp2"})
_TORCHTNT_STRATEGY_CLASSES = frozenset({"DDPStrategy", "FSDPStrategy", "FSDP2Strategy"})
_TORCHTNT_PREPARES = frozenset({"prepare_ddp", "prepare_fsdp", "prepare_fsdp2"})


def _imported_roots(ctx: FileContext) -> set[str]:
    key = ("imported-roots",)
    if key not in ctx.memo:
        roots: set[str] = set()
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Import):
                roots.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.partition(".")[0])
        ctx.memo[key] = roots
    return ctx.memo[key]  # type: ignore[return-value]


def _calls(ctx: FileContext) -> list[ast.Call]:
    key = ("loader-frameworks-calls",)
    if key not in ctx.memo:
        ctx.memo[key] = [node for node in ast.walk(ctx.tree) if isinstance(node, ast.Call)]
    return ctx.memo[key]  # type: ignore[return-value]


def _last_name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def loader_sharding_framework(ctx: FileContext) -> str | None:
    """The framework of this file that splits the loaders it is given between the ranks, None when there is none."""
    roots = _imported_roots(ctx)
    for root, framework in _SHARDING_ROOTS.items():
        if root in roots:
            return framework
    calls = _calls(ctx)
    if "ray" in roots:
        for call in calls:
            framework = _SHARDING_CALLS.get(ctx.qualified_name(call.func, []) or "")
            if framework:
                return framework
    if "fastai" in roots and any(_last_name(call.func) in _FASTAI_DISTRIBUTED for call in calls):
        return "fastai's distributed context"
    if "opacus" in roots and any(_poisson_private(call) for call in _calls_on_every_path(ctx)):
        return "opacus's make_private (Poisson sampling per rank)"
    if any(_last_name(call.func) == "prepare" for call in calls) and _builds_an_accelerator(ctx, calls):
        return "an accelerate Accelerator's prepare"
    return None


def _calls_on_every_path(ctx: FileContext) -> list[ast.Call]:
    """The calls that run whenever their function does (a script's `if not args.disable_dp: make_private(...)` leaves
    its plain-DDP path with the unsharded loader)."""
    key = ("calls-on-every-path",)
    if key not in ctx.memo:
        ctx.memo[key] = [
            node
            for statement in statements_on_every_path(ctx.tree)
            if isinstance(statement, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return))
            for node in ast.walk(statement)
            if isinstance(node, ast.Call)
        ]
    return ctx.memo[key]  # type: ignore[return-value]


def _poisson_private(call: ast.Call) -> bool:
    """`privacy_engine.make_private(...)` that keeps Poisson sampling (not `poisson_sampling=False`)."""
    if _last_name(call.func) not in _OPACUS_PRIVATE:
        return False
    chosen = next((k.value for k in call.keywords if k.arg == "poisson_sampling"), None)
    return not (isinstance(chosen, ast.Constant) and chosen.value is False)


def _builds_an_accelerator(ctx: FileContext, calls: list[ast.Call]) -> bool:
    """Whether the file builds an instance of a project class derived from accelerate's Accelerator (a framework's
    engine, such as catalyst's), whose `prepare` shards loaders as Accelerator's does."""
    for call in calls:
        if isinstance(call.func, (ast.Name, ast.Attribute)) and _last_name(call.func)[:1].isupper():
            qualified = ctx.qualified_name(call.func, [])
            if qualified and any(ctx.project.derives_from(qualified, base) for base in _ACCELERATORS):
                return True
    return False


def torchtnt_distributes(ctx: FileContext) -> bool:
    """A torchtnt unit or module prepared for DDP/FSDP: `strategy="ddp"` (also as one branch of a conditional
    expression), `strategy=DDPStrategy(...)`, `prepare_ddp(...)`; the process group is torchtnt's `init_from_env`
    under a launcher."""
    if "torchtnt" not in _imported_roots(ctx):
        return False
    for call in _calls(ctx):
        if _last_name(call.func) in _TORCHTNT_PREPARES | _TORCHTNT_STRATEGY_CLASSES:
            return True
        for keyword in call.keywords:
            if keyword.arg == "strategy" and any(_names_a_strategy(value) for value in _alternatives(keyword.value)):
                return True
    return False


def _alternatives(value: ast.expr) -> list[ast.expr]:
    """The values an expression may take: both of `"ddp" if dist.is_initialized() else None`."""
    return [*_alternatives(value.body), *_alternatives(value.orelse)] if isinstance(value, ast.IfExp) else [value]


def _names_a_strategy(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value in _TORCHTNT_STRATEGIES
