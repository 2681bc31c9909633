"""Is a statement restricted to one rank? Guards, early exits, decorators, per-rank paths, helpers."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.scopes import FUNCTIONS, decorator_names, local_value, preceded_by
from pitfall_lint.context import FileContext

# Identifiers that name a rank or a "this is the main process" predicate, in the spellings that
# torch, torchrun, Lightning, Accelerate, timm, DeepSpeed and hand-written scripts use.
_RANK_WORD = re.compile(
    r"rank|main_process|is_main|master|primary|global_zero|local_zero|is_chief|is_root|procid|process_index"
    r"|ordinal|gpu_id",
    re.IGNORECASE,
)
_TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_MAX_HELPER_DEPTH = 3
_MAX_VARIABLE_DEPTH = 3


def mentions_rank(node: ast.AST) -> bool:
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and _RANK_WORD.search(child.id):
            return True
        if isinstance(child, ast.Attribute) and _RANK_WORD.search(child.attr):
            return True
        if isinstance(child, ast.Constant) and isinstance(child.value, str) and _RANK_WORD.search(child.value):
            return True
    return False


def _parents(ctx: FileContext) -> dict[int, ast.AST]:
    key = ("parents",)
    if key not in ctx.memo:
        ctx.memo[key] = {id(child): node for node in ast.walk(ctx.tree) for child in ast.iter_child_nodes(node)}
    return ctx.memo[key]  # type: ignore[return-value]


def ancestors_of(ctx: FileContext, node: ast.AST) -> list[ast.AST]:
    parents = _parents(ctx)
    chain = []
    while id(node) in parents:
        node = parents[id(node)]
        chain.append(node)
    chain.reverse()
    return chain


def _exits_early_on_rank(statement: ast.stmt) -> bool:
    """`if rank != 0: return` and its relatives."""
    return (
        isinstance(statement, ast.If)
        and mentions_rank(statement.test)
        and bool(statement.body)
        and isinstance(statement.body[-1], _TERMINATORS)
    )


def _preceded_by_rank_exit(node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    return preceded_by(node, ancestors, _exits_early_on_rank)


def path_mentions_rank(path: ast.AST, ancestors: Sequence[ast.AST], _depth: int = 0) -> bool:
    """A checkpoint path that contains the rank, directly or through local variables, is per rank."""
    if mentions_rank(path):
        return True
    if _depth >= _MAX_VARIABLE_DEPTH:
        return False
    function = next((a for a in reversed(ancestors) if isinstance(a, FUNCTIONS)), None)
    for name in (n for n in ast.walk(path) if isinstance(n, ast.Name)):
        value = local_value(name.id, function, getattr(name, "lineno", 0))
        if value is not None and path_mentions_rank(value, ancestors, _depth + 1):
            return True
    return False


def _call_sites(ctx: FileContext, name: str) -> list[ast.Call]:
    """Calls of `name(...)` or `<anything>.name(...)`, from an index of the file's calls built once."""
    key = ("calls-by-name",)
    if key not in ctx.memo:
        found: dict[str, list[ast.Call]] = {}
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, (ast.Name, ast.Attribute)):
                    found.setdefault(func.id if isinstance(func, ast.Name) else func.attr, []).append(node)
        ctx.memo[key] = found
    return ctx.memo[key].get(name, [])  # type: ignore[attr-defined, no-any-return]


def is_restricted_to_one_rank(
    ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST], _depth: int = 0
) -> bool:
    """Whether something stops every rank but one (or one per file) from reaching `node`.

    Kept per node, and per helper for its callers: each call site is judged once, however many saves the helper
    holds.
    """
    key = ("restricted-to-one-rank", id(node), _depth)
    if key not in ctx.memo:
        ctx.memo[key] = _is_restricted(ctx, node, ancestors, _depth)
    return ctx.memo[key]  # type: ignore[return-value]


def _is_restricted(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST], _depth: int) -> bool:
    for ancestor in ancestors:
        if isinstance(ancestor, (ast.If, ast.IfExp, ast.While)) and mentions_rank(ancestor.test):
            return True
        if isinstance(ancestor, FUNCTIONS) and any(_RANK_WORD.search(d) for d in decorator_names(ancestor)):
            return True
    if _preceded_by_rank_exit(node, ancestors):
        return True
    function = next((a for a in reversed(ancestors) if isinstance(a, FUNCTIONS)), None)
    if function is None or _depth >= _MAX_HELPER_DEPTH:
        return False
    # A helper whose every caller in this file is restricted is restricted too.
    key = ("callers-restricted-to-one-rank", id(function), _depth)
    if key not in ctx.memo:
        sites = _call_sites(ctx, function.name)
        ctx.memo[key] = bool(sites) and all(
            is_restricted_to_one_rank(ctx, site, ancestors_of(ctx, site), _depth + 1) for site in sites
        )
    return ctx.memo[key]  # type: ignore[return-value]
