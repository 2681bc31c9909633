"""DataParallel / DistributedDataParallel wrappers: which names hold one, whose state_dict a save writes, and
which checkpoint file a path names (so that a save in one file can be matched with a load in another)."""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.modules import same_module
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import (
    Function,
    enclosing_function,
    local_value,
    reaching_values,
    statements_in,
    statements_on_every_path,
)
from pitfall_lint.context import FileContext

WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel"})
_JOINERS = frozenset({"os.path.join", "posixpath.join", "pathlib.Path", "pathlib.PurePath", "str"})
_MAX_DEPTH = 3
_NAMES_A_PATH = re.compile(r"path|file|ckpt|checkpoint")  # a loader's keyword that takes the file


def holds_wrapper(ctx: FileContext, name: str, ancestors: Sequence[ast.AST], line: int, wrappers: frozenset[str] = WRAPPERS) -> bool:
    """True when the last assignment to `name` before `line` (in the function, else at module level) wraps it in one
    of `wrappers` (qualified names; DataParallel and DistributedDataParallel unless told)."""
    return wrap_of(ctx, name, ancestors, line, wrappers) is not None


def wrap_of(
    ctx: FileContext, name: str, ancestors: Sequence[ast.AST], line: int, wrappers: frozenset[str] = WRAPPERS
) -> ast.Call | None:
    """The wrapper call that the name holds at the line (see holds_wrapper), None when it holds none."""
    key = ("names-a-wrapper", wrappers)
    if key not in ctx.memo:  # a file that never spells a wrapper's name cannot call one
        ctx.memo[key] = any(w.rpartition(".")[2].encode() in ctx.text.data for w in wrappers)
    if not ctx.memo[key]:
        return None
    function = enclosing_function(ancestors)
    value = _assigned(ctx, name, function, line)
    return wrap_in(ctx, value, ancestors, wrappers) if value is not None else None


def wrap_in(
    ctx: FileContext, value: ast.AST, ancestors: Sequence[ast.AST], wrappers: frozenset[str] = WRAPPERS, depth: int = 0
) -> ast.Call | None:
    """The wrapper call a value gives: the wrap itself, through the calls that return the module they are called on
    (`DataParallel(model).cuda()`), or a name that may hold it where it is rebound through them
    (`model = model.to(device).train()` after `model = DataParallel(model)`, not in the other branch of its `if`)."""
    module = same_module(value)
    if module is not value and isinstance(module, ast.Name) and depth < _MAX_DEPTH:
        held = (wrap_in(ctx, v, ancestors, wrappers, depth + 1) for v in _values_at(ctx, module))
        return next((wrap for wrap in held if wrap is not None), None)
    return module if isinstance(module, ast.Call) and ctx.qualified_name(module.func, ancestors) in wrappers else None


def _values_at(ctx: FileContext, name: ast.Name) -> list[ast.AST]:
    """The values the name may hold where it is read: its function's assignments that reach it, else the module's."""
    chain = ancestors_of(ctx, name)
    function = enclosing_function(chain)
    found: list[ast.AST] = list(reaching_values(name.id, function or ctx.tree, name, chain))
    if not found and function is not None:
        value = local_value(name.id, None, name.lineno, ctx.tree)
        found = [value] if value is not None else []
    return found


def _assigned(ctx: FileContext, name: str, function: Function | None, line: int) -> ast.AST | None:
    """The last value assigned to the name before the line: in the function, else at module level."""
    value = local_value(name, function, line, ctx.tree)
    if value is None and function is not None:
        value = local_value(name, None, line, ctx.tree)
    return value


def wrapped_on_every_path(ctx: FileContext, wrap: ast.Call) -> bool:
    """Whether the assignment of this wrap is on every path through its scope: not under an `if`, a loop or an
    `except` (a `with` block, a `try` body and the `__main__` block are), so that the name holds the wrapper wherever
    it is read after it, and not sometimes the bare model (`if device == "cuda": net = DataParallel(net)`)."""
    key = ("wrapped-on-every-path",)
    if key not in ctx.memo:
        ctx.memo[key] = {
            id(same_module(statement.value))  # `net = DataParallel(net).cuda()` wraps too
            for statement in statements_on_every_path(ctx.tree)
            if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None
        }
    return id(wrap) in ctx.memo[key]  # type: ignore[operator]


def _state_dict_receivers(value: ast.AST) -> list[ast.expr]:
    """`X` for every `X.state_dict()` in the saved object (directly, or as values of a dict literal)."""
    values = list(value.values) if isinstance(value, ast.Dict) else [value]
    return [
        v.func.value
        for v in values
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "state_dict"
    ]


def saved_wrapper_states(
    ctx: FileContext, save: ast.Call, ancestors: Sequence[ast.AST], wrappers: frozenset[str] = WRAPPERS
) -> list[str]:
    """The names of the wrappers whose `state_dict()` a `torch.save(obj, path)` call writes (keys with `module.`, or
    with `_orig_mod.` for `torch.compile`'s wrapper when `wrappers` names it)."""
    if not save.args:
        return []
    saved: ast.AST = save.args[0]
    if isinstance(saved, ast.Name):
        saved = local_value(saved.id, enclosing_function(ancestors), save.lineno, ctx.tree) or saved
    return [
        receiver.id
        for receiver in _state_dict_receivers(saved)
        if isinstance(receiver, ast.Name) and _may_hold_wrapper(ctx, receiver.id, save, ancestors, wrappers)
    ]


def _may_hold_wrapper(
    ctx: FileContext, name: str, use: ast.AST, ancestors: Sequence[ast.AST], wrappers: frozenset[str] = WRAPPERS
) -> bool:
    """Whether a value the name may hold at `use` is a wrapper: the save in the `else` of `if args.distributed:`
    reads the bare model even when the wrap, in the body of an earlier `if args.distributed:`, is the last one
    written above it."""
    values = reaching_values(name, enclosing_function(ancestors) or ctx.tree, use, ancestors)
    if not values:  # assigned outside the scope: its last value there
        return holds_wrapper(ctx, name, ancestors, use.lineno, wrappers)
    return any(wrap_in(ctx, value, ancestors, wrappers) is not None for value in values)


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


def wrapper_receiving(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> ast.Call | None:
    """The wrap whose module `<name>.load_state_dict(...)` loads into, when the name holds that wrapper on every path
    (its keys then carry `module.` as the wrapper's saved ones do); None for a bare model, or one not known."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    wrap = wrap_of(ctx, receiver.id, ancestors, call.lineno) if isinstance(receiver, ast.Name) else None
    return wrap if wrap is not None and wrapped_on_every_path(ctx, wrap) else None


def loaded_checkpoint(ctx: FileContext, state: ast.AST, ancestors: Sequence[ast.AST], line: int) -> str | None:
    """The file name of the checkpoint a state to load comes from (see checkpoint_key): `torch.load(path)`,
    `torch.load(path)["model"]`, any loader given the path (`load_to_device(folder / "model.pt")`), through local
    variables; None when the source does not name the file."""
    function = enclosing_function(ancestors)
    value: ast.AST | None = state
    for _ in range(_MAX_DEPTH):
        while isinstance(value, ast.Subscript):
            value = value.value
        if not isinstance(value, ast.Name):
            break
        value = local_value(value.id, function, line, ctx.tree)
    if not isinstance(value, ast.Call):
        return None
    paths = [*value.args[:1], *(k.value for k in value.keywords if k.arg == "f" or _NAMES_A_PATH.search(k.arg or ""))]
    return next((key for path in paths if (key := checkpoint_key(ctx, path, ancestors)) is not None), None)


# What restores the training state around a model rather than the model: no `module.` prefix can be in its keys.
_TRAINING_STATE = re.compile(r"optim|sched|scaler", re.IGNORECASE)
_TRAINING_STATE_BUILDERS = ("torch.optim.", "torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.GradScaler")


def restores_training_state(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST]) -> bool:
    """Whether `X.load_state_dict(state)` restores an optimizer, a learning-rate scheduler or a gradient scaler
    (`optimizer.load_state_dict(checkpoint["optimizer"])` beside the model's own load): the receiver is named or
    built as one, or the state is the checkpoint's entry for one."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    names = [ast.unparse(receiver)] if receiver is not None else []
    if isinstance(receiver, ast.Name):
        value = local_value(receiver.id, enclosing_function(ancestors), call.lineno, ctx.tree)
        if isinstance(value, ast.Call) and (ctx.qualified_name(value.func, ancestors) or "").startswith(_TRAINING_STATE_BUILDERS):
            return True
    state = call.args[0] if call.args else None
    while isinstance(state, ast.Subscript):
        if isinstance(state.slice, ast.Constant) and isinstance(state.slice.value, str):
            names.append(state.slice.value)
        state = state.value
    return any(_TRAINING_STATE.search(name) for name in names)


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
