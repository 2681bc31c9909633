"""Is a statement restricted to one rank? Guards, early exits, decorators, per-rank paths, helpers."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pitfall_lint.analysis.scopes import FUNCTIONS, decorator_names, enclosing_function, local_value, preceded_by
from pitfall_lint.context import FileContext

# Identifiers that name a rank or a "this is the main process" predicate, in the spellings that
# torch, torchrun, Lightning, Accelerate, timm, DeepSpeed and hand-written scripts use.
_RANK_WORD = re.compile(
    r"rank|main_process|is_main|master|primary|global_zero|local_zero|is_chief|is_root|procid|process_index"
    r"|ordinal|gpu_id",
    re.IGNORECASE,
)
_TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
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


def _exits_early_on_rank(ctx: FileContext, statement: ast.stmt) -> bool:
    """`if rank != 0: return` and its relatives."""
    return (
        isinstance(statement, ast.If)
        and bool(statement.body)
        and isinstance(statement.body[-1], _TERMINATORS)
        and _tests_rank(ctx, statement.test)
    )


def _rank_decorated(ctx: FileContext, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`@rank_zero_only` and its relatives."""
    key = ("rank-decorated", id(function))
    if key not in ctx.memo:
        ctx.memo[key] = any(_RANK_WORD.search(d) for d in decorator_names(function))
    return ctx.memo[key]  # type: ignore[return-value]


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


def is_locally_restricted(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether a rank guard, a rank-only decorator or an early rank exit in the node's own code restricts it."""
    for ancestor in ancestors:
        if isinstance(ancestor, (ast.If, ast.IfExp, ast.While)) and _tests_rank(ctx, ancestor.test):
            return True
        if isinstance(ancestor, FUNCTIONS) and _rank_decorated(ctx, ancestor):
            return True
    return preceded_by(ctx, node, ancestors, _exits_early_on_rank)


def _tests_rank(ctx: FileContext, test: ast.expr) -> bool:
    """mentions_rank, once per test however many statements the guard encloses."""
    key = ("tests-rank", id(test))
    if key not in ctx.memo:
        ctx.memo[key] = mentions_rank(test)
    return ctx.memo[key]  # type: ignore[return-value]


def is_restricted_to_one_rank(ctx: FileContext, node: ast.AST, ancestors: Sequence[ast.AST]) -> bool:
    """Whether something stops every rank but one (or one per file) from reaching `node`: a guard around it,
    or, for code in a function, a guard around every call of that function anywhere in the project."""
    if is_locally_restricted(ctx, node, ancestors):
        return True
    function = enclosing_function(ancestors)
    return function is not None and ctx.project.callers_restricted(function, ancestors) is not None
