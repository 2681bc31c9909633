"""Which rank a value holds: the global one (RANK, `dist.get_rank()`), the local one (LOCAL_RANK, or a rank modulo a
node's processes: `rank % torch.cuda.device_count()`), the index that mp.spawn passes, or something derived from
them (`rank + 1`)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
import re
from typing import Literal

from pitfall_lint.analysis.distributed import SPAWNERS, launcher_variable_read
from pitfall_lint.analysis.ranks import ancestors_of, names_rank
from pitfall_lint.analysis.scopes import FUNCTIONS, enclosing_class, enclosing_function, statements_in
from pitfall_lint.context import FileContext

Origin = Literal["global", "local", "index", "derived", "unknown"]
_ENVIRONMENT = {"RANK": "global", "LOCAL_RANK": "local"}
_CALLS = {"torch.distributed.get_rank": "global", "torch.distributed.get_node_local_rank": "local"}
# Names that say which rank they hold, as torch's launcher, Lightning (`trainer.global_rank`) and Accelerate or
# transformers (`state.process_index`, `args.local_process_index`) spell them. A bare `rank` says neither.
_NAMED = {"local_rank": "local", "local_process_index": "local", "global_rank": "global", "process_index": "global"}
_WRAPPERS = frozenset({"int", "str"})
# Whole names of the number of processes that one node runs (`ngpus_per_node`, `args.nproc_per_node`,
# `local_world_size`): a rank modulo it is a rank within the node.
_NODE_SIZE = re.compile(r"(?:n|num_)?(?:gpus?|procs?|processes|devices)_?per_?node|local_world_size", re.IGNORECASE)
_RANKS = frozenset({"global", "local", "index"})
_MAX_DEPTH = 4
_SPAWN_WORDS = (b"spawn", b"start_processes")
_INSTANCE_NAMES = frozenset({"self", "cls"})


def _dotted(node: ast.AST) -> str | None:
    return ast.unparse(node) if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)) else None


def _attribute_key(node: ast.AST, owner: ast.ClassDef | None) -> tuple[int, str] | None:
    """`self.rank` is one attribute per class; `args.local_rank` one per file."""
    dotted = _dotted(node)
    if dotted is None:
        return None
    on_self = dotted.partition(".")[0] in _INSTANCE_NAMES
    return (id(owner) if on_self and owner is not None else 0, dotted)


def _attribute_values(ctx: FileContext) -> dict[tuple[int, str], list[ast.expr]]:
    """Every value the file assigns to each attribute (`self.rank = ...`, `args.local_rank = ...`)."""
    key = ("rank-origin-attributes",)
    if key not in ctx.memo:
        found: dict[tuple[int, str], list[ast.expr]] = {}
        todo: list[tuple[ast.AST, ast.ClassDef | None]] = [(ctx.tree, None)]
        while todo:
            scope, owner = todo.pop()
            for node in statements_in(scope, definitions=False):
                if isinstance(node, (ast.ClassDef, *FUNCTIONS)):
                    todo.append((node, node if isinstance(node, ast.ClassDef) else owner))
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        attribute = _attribute_key(target, owner)
                        if attribute is not None:
                            found.setdefault(attribute, []).append(node.value)
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def spawned_functions(ctx: FileContext, found: set[str] | None = None) -> set[str]:
    """Names of the functions this file starts with mp.spawn / start_processes: their first parameter is the index.
    `found`: those that a walk of the whole file has just collected, which spares another."""
    key = ("spawned-functions",)
    if key not in ctx.memo and found is not None:
        ctx.memo[key] = found
    if key not in ctx.memo and not any(word in ctx.text.data for word in _SPAWN_WORDS):
        ctx.memo[key] = set()
    if key not in ctx.memo:
        ctx.memo[key] = {
            node.args[0].id
            for node in ast.walk(ctx.tree)
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
            and ctx.qualified_name(node.func, []) in SPAWNERS
        }
    return ctx.memo[key]  # type: ignore[return-value]


def origins(ctx: FileContext, expr: ast.AST, ancestors: Sequence[ast.AST], depth: int = 0) -> set[Origin]:
    """What `expr` holds; constants add nothing (`rank = 0` as a default)."""
    if depth > _MAX_DEPTH:
        return {"unknown"}
    if isinstance(expr, ast.Constant):
        return set()
    variable = launcher_variable_read(expr)
    if variable is not None:
        found: set[Origin] = {_ENVIRONMENT.get(variable, "unknown")}  # type: ignore[arg-type]
        if isinstance(expr, ast.Call):  # os.environ.get("LOCAL_RANK", os.environ.get("RANK")): a fallback
            for fallback in [*expr.args[1:], *(k.value for k in expr.keywords)]:
                found |= origins(ctx, fallback, ancestors, depth + 1)
        return found
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Name) and expr.func.id in _WRAPPERS and len(expr.args) == 1:
            return origins(ctx, expr.args[0], ancestors, depth + 1)
        called = ctx.qualified_name(expr.func, ancestors)
        if called in _CALLS and not expr.args and not expr.keywords:  # get_rank(group) is a rank within the group
            return {_CALLS[called]}  # type: ignore[arg-type]
        return {"unknown"}
    if isinstance(expr, ast.IfExp):
        return origins(ctx, expr.body, ancestors, depth + 1) | origins(ctx, expr.orelse, ancestors, depth + 1)
    if isinstance(expr, ast.BoolOp):
        return set().union(*(origins(ctx, value, ancestors, depth + 1) for value in expr.values))
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod) and _rank_in_node(ctx, expr, ancestors, depth):
        return {"local"}  # `args.rank % ngpus_per_node`: the process's place on its node
    if isinstance(expr, ast.Attribute):
        return _attribute_origins(ctx, expr, ancestors, depth)
    if isinstance(expr, ast.Name):
        return _name_origins(ctx, expr, ancestors, depth)
    return {"derived"}


def _rank_in_node(ctx: FileContext, expr: ast.BinOp, ancestors: Sequence[ast.AST], depth: int) -> bool:
    """`rank % ngpus_per_node`: a rank modulo the number of processes one node runs."""
    if not counts_node_processes(ctx, expr.right, ancestors):
        return False
    return names_rank(expr.left) or bool(origins(ctx, expr.left, ancestors, depth + 1) & _RANKS)


def counts_node_processes(ctx: FileContext, expr: ast.AST, ancestors: Sequence[ast.AST], depth: int = 0) -> bool:
    """Whether `expr` is the number of processes one node runs: its device count (`torch.cuda.device_count()`),
    LOCAL_WORLD_SIZE, a name that says so (`ngpus_per_node`), or a variable set from one of them."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in _WRAPPERS and len(expr.args) == 1:
        expr = expr.args[0]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "device_count":
        return True
    if launcher_variable_read(expr) == "LOCAL_WORLD_SIZE":
        return True
    name = expr.id if isinstance(expr, ast.Name) else expr.attr if isinstance(expr, ast.Attribute) else ""
    if name and _NODE_SIZE.fullmatch(name):
        return True
    if isinstance(expr, ast.Name) and depth < _MAX_DEPTH:
        function = enclosing_function(ancestors)
        value = _assigned(ctx, function, expr.id, expr.lineno) if function is not None else None
        value = value or _assigned(ctx, ctx.tree, expr.id, expr.lineno if function is None else 1 << 30)
        return value is not None and counts_node_processes(ctx, value, ancestors, depth + 1)
    return False


def _attribute_origins(ctx: FileContext, expr: ast.Attribute, ancestors: Sequence[ast.AST], depth: int) -> set[Origin]:
    attribute = _attribute_key(expr, enclosing_class(ancestors))
    values = _attribute_values(ctx).get(attribute, []) if attribute else []
    if values:  # each value read where it is assigned: `self.rank = rank` in __init__ names __init__'s `rank`
        return set().union(*(origins(ctx, value, ancestors_of(ctx, value), depth + 1) for value in values))
    return {_NAMED.get(expr.attr, "unknown")}  # type: ignore[arg-type]


def _assigned(ctx: FileContext, scope: ast.AST, name: str, before: int) -> ast.expr | None:
    """`local_value` (the last simple assignment to `name` before the line, in a function or at module level), with
    each scope's assignments gathered once: a file with many `.to(device)` calls stays linear."""
    key = ("rank-origin-assignments", id(scope))
    if key not in ctx.memo:
        found: dict[str, list[tuple[int, ast.expr]]] = {}
        for node in statements_in(scope, definitions=not isinstance(scope, ast.Module)):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, []).append((node.lineno, node.value))
        ctx.memo[key] = {n: sorted(values, key=lambda item: item[0]) for n, values in found.items()}
    values = ctx.memo[key].get(name, [])  # type: ignore[attr-defined]
    earlier = [value for line, value in values if line < before]
    return earlier[-1] if earlier else None


def _name_origins(ctx: FileContext, expr: ast.Name, ancestors: Sequence[ast.AST], depth: int) -> set[Origin]:
    function = enclosing_function(ancestors)
    value = _assigned(ctx, function, expr.id, expr.lineno) if function is not None else None
    if value is not None:
        return origins(ctx, value, ancestors, depth + 1)
    if function is not None:
        arguments = function.args
        positional = [*arguments.posonlyargs, *arguments.args]
        if positional and positional[0].arg == expr.id and function.name in spawned_functions(ctx):
            return {"index"}
        if expr.id in {a.arg for a in [*positional, *arguments.kwonlyargs]}:
            return {_NAMED.get(expr.id, "unknown")}  # type: ignore[arg-type]
    before = expr.lineno if function is None else 1 << 30
    value = _assigned(ctx, ctx.tree, expr.id, before)
    if value is not None:
        return origins(ctx, value, [ctx.tree], depth + 1)
    return {_NAMED.get(expr.id, "unknown")}  # type: ignore[arg-type]
