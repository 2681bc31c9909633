"""DataParallel / DistributedDataParallel wrappers: which names hold one, whose state_dict a save writes, and
which checkpoint file a path names (so that a save in one file can be matched with a load in another)."""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.scopes import enclosing_function, local_value, statements_in
from pitfall_lint.context import FileContext

WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel"})
_JOINERS = frozenset({"os.path.join", "posixpath.join", "pathlib.Path", "pathlib.PurePath", "str"})
_MAX_DEPTH = 3


def holds_wrapper(ctx: FileContext, name: str, ancestors: Sequence[ast.AST], line: int, wrappers: frozenset[str] = WRAPPERS) -> bool:
    """True when the last assignment to `name` before `line` (in the function, else at module level) wraps it in one
    of `wrappers` (qualified names; DataParallel and DistributedDataParallel unless told)."""
    key = ("names-a-wrapper", wrappers)
    if key not in ctx.memo:  # a file that never spells a wrapper's name cannot call one
        ctx.memo[key] = any(w.rpartition(".")[2].encode() in ctx.text.data for w in wrappers)
    if not ctx.memo[key]:
        return False
    function = enclosing_function(ancestors)
    value = local_value(name, function, line, ctx.tree)
    if value is None and function is not None:
        value = local_value(name, None, line, ctx.tree)
    return isinstance(value, ast.Call) and ctx.qualified_name(value.func, ancestors) in wrappers


def _state_dict_receivers(value: ast.AST) -> list[ast.expr]:
    """`X` for every `X.state_dict()` in the saved object (directly, or as values of a dict literal)."""
    values = list(value.values) if isinstance(value, ast.Dict) else [value]
    return [
        v.func.value
        for v in values
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "state_dict"
    ]


def saved_wrapper_states(ctx: FileContext, save: ast.Call, ancestors: Sequence[ast.AST]) -> list[str]:
    """The names of the wrappers whose `state_dict()` a `torch.save(obj, path)` call writes (keys with `module.`)."""
    if not save.args:
        return []
    saved: ast.AST = save.args[0]
    if isinstance(saved, ast.Name):
        saved = local_value(saved.id, enclosing_function(ancestors), save.lineno, ctx.tree) or saved
    return [
        receiver.id
        for receiver in _state_dict_receivers(saved)
        if isinstance(receiver, ast.Name) and holds_wrapper(ctx, receiver.id, ancestors, save.lineno)
    ]


def _file_pattern(ctx: FileContext, path: ast.AST, ancestors: Sequence[ast.AST], depth: int = 0) -> str | None:
    """The file name a path expression ends in, `*` where it is computed: `ckpt_*.pt` for f"{d}/ckpt_{step}.pt"."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(path, ast.Constant) and isinstance(path.value, str):
        return path.value
    if isinstance(path, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "*" for v in path.values)
    if isinstance(path, ast.BinOp) and isinstance(path.op, (ast.Div, ast.Add)):  # Path / "x.pt", folder + "x.pt"
        return _file_pattern(ctx, path.right, ancestors, depth + 1)
    if isinstance(path, ast.Call) and path.args and ctx.qualified_name(path.func, ancestors) in _JOINERS:
        return _file_pattern(ctx, path.args[-1], ancestors, depth + 1)
    if isinstance(path, ast.Name):
        value = local_value(path.id, enclosing_function(ancestors), path.lineno, ctx.tree)
        return _file_pattern(ctx, value, ancestors, depth + 1) if value is not None else None
    return None


def checkpoint_key(ctx: FileContext, path: ast.AST, ancestors: Sequence[ast.AST]) -> str | None:
    """The checkpoint's file name (a glob where parts are computed), None unless a literal name is part of it."""
    pattern = _file_pattern(ctx, path, ancestors)
    if pattern is None:
        return None
    name = pattern.replace("\\", "/").rpartition("/")[2]
    stem = name.rpartition(".")[0] or name
    return name if any(c.isalnum() for c in stem.replace("*", "")) else None


def same_checkpoint(first: str, second: str) -> bool:
    """Whether two file names surely name one file: equal, or a literal name that the other's pattern matches
    (two computed names are only taken as one when they are built alike)."""
    if "*" in first and "*" in second:
        return first == second
    return fnmatch.fnmatchcase(first, second) or fnmatch.fnmatchcase(second, first)


DDP = frozenset({"torch.nn.parallel.DistributedDataParallel"})


@dataclass(frozen=True)
class WrapBinding:
    """`wrapper = DistributedDataParallel(inner, ...)` in a function (or at module level)."""

    call: ast.Call
    statement: ast.stmt
    inner: str | None  # dotted name of the module wrapped: `model`, `self.model`
    wrapper: str | None  # dotted name the wrapper is bound to


def wrap_bindings(ctx: FileContext, scope: ast.AST, wrappers: frozenset[str] = DDP) -> list[WrapBinding]:
    """Every wrap in the scope's own statements (not in the functions it defines), in source order; the wrap may be
    the receiver of a method chain (`DDP(model).cuda()`)."""
    key = ("wrap-bindings", id(scope), wrappers)
    if key not in ctx.memo:
        from pitfall_lint.analysis.training import dotted

        found = []
        for statement in statements_in(scope, definitions=False):
            if not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr)) or statement.value is None:
                continue
            value: ast.AST = statement.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Call):
                value = value.func.value
            if not (isinstance(value, ast.Call) and ctx.qualified_name(value.func, _scope_chain(scope)) in wrappers):
                continue
            inner = next((k.value for k in value.keywords if k.arg == "module"), value.args[0] if value.args else None)
            targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
            wrapper = dotted(targets[0]) if len(targets) == 1 and targets[0] is not None else None
            found.append(WrapBinding(value, statement, dotted(inner) if inner is not None else None, wrapper))
        ctx.memo[key] = sorted(found, key=lambda b: (b.call.lineno, b.call.col_offset))
    return ctx.memo[key]  # type: ignore[return-value]


def _scope_chain(scope: ast.AST) -> list[ast.AST]:
    """Ancestors enough for name resolution inside the scope: the scope itself (its local imports)."""
    return [scope] if not isinstance(scope, ast.Module) else []
