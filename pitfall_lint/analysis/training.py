"""Facts about training code: optimizers, loops and the statements in them, assignments that reach a use."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterable, Iterator, Sequence

from pitfall_lint.analysis.scopes import FUNCTIONS, Function, position_in_block
from pitfall_lint.context import FileContext

LOOPS = (ast.For, ast.AsyncFor, ast.While)
Loop = ast.For | ast.AsyncFor | ast.While
# Definitions whose bodies do not run where they are written.
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# torch.optim submodules that hold schedulers and averaging helpers, not optimizers.
_NOT_OPTIMIZER_MODULES = frozenset({"lr_scheduler", "swa_utils"})


# Engines whose `step()` also zeroes the gradients (DeepSpeed's engine calls zero_grad after stepping).
SELF_ZEROING_ENGINES = frozenset({"deepspeed.initialize"})


def is_optimizer_class(qualified: str | None) -> bool:
    """`torch.optim.SGD`, `torch.optim.adamw.AdamW`; not `torch.optim.lr_scheduler.StepLR`."""
    if not qualified or not qualified.startswith("torch.optim."):
        return False
    parts = qualified.split(".")
    return parts[-1][:1].isupper() and not _NOT_OPTIMIZER_MODULES.intersection(parts) and parts[-1] != "Optimizer"


def walk_same_scope(nodes: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Every node under `nodes` that runs in their scope: nested defs, classes and lambdas are skipped."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _DEFINITIONS):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def dotted(node: ast.AST) -> str | None:
    """`model` or `self.model.encoder` for a chain of plain attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def call_name(call: ast.Call) -> str | None:
    """The last name of the called function: `step` for `opt.step()`, `train` for `train()`."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return call.func.id if isinstance(call.func, ast.Name) else None


def functions_named(ctx: FileContext, name: str) -> list[Function]:
    """Every function or method of the file with this name (call sites are matched by name only)."""
    key = ("functions-by-name",)
    table = ctx.memo.get(key)
    if table is None:
        table = {}
        for node in ast.walk(ctx.tree):
            if isinstance(node, FUNCTIONS):
                table.setdefault(node.name, []).append(node)
        ctx.memo[key] = table
    return table.get(name, [])  # type: ignore[union-attr]


def optimizer_variables(ctx: FileContext, ancestors: Sequence[ast.AST]) -> set[str]:
    """Dotted names assigned a `torch.optim.*` optimizer in the enclosing functions, class or module."""
    found: set[str] = set()
    scopes: list[ast.AST] = [a for a in ancestors if isinstance(a, (*FUNCTIONS, ast.ClassDef))]
    scopes.append(ctx.tree)
    for scope in scopes:
        key = ("optimizer-variables", id(scope))
        names = ctx.memo.get(key)
        if names is None:
            names = set()
            # A class's methods share `self.x`; a function's and the module's own statements are read alone.
            if isinstance(scope, ast.ClassDef):
                nodes: Iterable[ast.AST] = ast.walk(scope)
            else:
                nodes = walk_same_scope(scope.body)  # type: ignore[attr-defined]
            for node in nodes:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    if is_optimizer_class(ctx.qualified_name(node.value.func, [])):
                        names.update(filter(None, (dotted(t) for t in node.targets)))
            ctx.memo[key] = names
        found |= names  # type: ignore[arg-type]
    return found


def _targets(node: ast.AST) -> list[ast.expr]:
    """What the statement (not its nested statements) stores into."""
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    return []


def stored_names(node: ast.AST) -> set[str]:
    """The names the statement (not its nested statements) binds."""
    return {n.id for t in _targets(node) for n in ast.walk(t) if isinstance(n, ast.Name)}


# What the last statement of a block that binds a name did: the `name = value` statement, or None for any
# other binding (a branch, a loop, a tuple target).
_Store = ast.Assign | None


def _block_stores(ctx: FileContext, parent: ast.AST, field: str) -> dict[str, list[tuple[int, _Store]]]:
    """For each name, the statements of `parent.<field>` that bind it, in order, with what they bound.

    `with` bodies always run, so a `with` counts as the last binding in its body; its own `as` names are other
    bindings. Built once per block, so that asking about a name before a statement is a bisect.
    """
    key = ("block-stores", id(parent), field)
    if key in ctx.memo:
        return ctx.memo[key]  # type: ignore[return-value]
    found: dict[str, list[tuple[int, _Store]]] = {}
    for index, statement in enumerate(getattr(parent, field)):
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            own = stored_names(statement)
            inner = {n: entries[-1][1] for n, entries in _block_stores(ctx, statement, "body").items() if n not in own}
            effects: dict[str, _Store] = {**inner, **dict.fromkeys(own)}
        else:
            effects = dict.fromkeys({n for node in walk_same_scope([statement]) for n in stored_names(node)})
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                if isinstance(statement.targets[0], ast.Name):
                    effects[statement.targets[0].id] = statement
        for name, effect in effects.items():
            found.setdefault(name, []).append((index, effect))
    ctx.memo[key] = found
    return found


def _scope_stores(ctx: FileContext, scope: ast.AST) -> dict[str, tuple[list[int], list[ast.AST]]]:
    """For each name, the nodes of the scope's own code that bind it, by line."""
    key = ("scope-stores", id(scope))
    if key not in ctx.memo:
        found: dict[str, list[tuple[int, ast.AST]]] = {}
        for node in walk_same_scope(getattr(scope, "body", [])):
            if hasattr(node, "lineno"):
                for name in stored_names(node):
                    found.setdefault(name, []).append((node.lineno, node))  # type: ignore[attr-defined]
        ctx.memo[key] = {
            name: ([line for line, _ in entries], [node for _, node in entries])
            for name, entries in ((n, sorted(e, key=lambda item: item[0])) for n, e in found.items())
        }
    return ctx.memo[key]  # type: ignore[return-value]


def _rebound_between(ctx: FileContext, scope: ast.AST, name: str, statement: ast.Assign, before_line: int) -> bool:
    lines, nodes = _scope_stores(ctx, scope).get(name, ([], []))
    start = bisect.bisect_left(lines, statement.end_lineno or statement.lineno)
    end = bisect.bisect_left(lines, before_line)
    return any(node is not statement for node in nodes[start:end])


def reaching_value(ctx: FileContext, name: str, use: ast.AST, ancestors: Sequence[ast.AST]) -> ast.expr | None:
    """The value of `name = value` when that statement surely ran just before `use`, else None.

    The assignment must be an earlier statement of a block that encloses the use (so no branch can
    skip it), in the same function, and nothing may rebind the name between the two.
    """
    chain = [*ancestors, use]
    function = next((a for a in reversed(ancestors) if isinstance(a, FUNCTIONS)), None)
    scope: ast.AST = function if function is not None else chain[0]
    scope_start = chain.index(scope)
    use_line = getattr(use, "lineno", 0)
    for index in range(len(chain) - 1, scope_start, -1):
        parent, child = chain[index - 1], chain[index]
        for field in ("body", "orelse", "finalbody"):
            position = position_in_block(parent, field, child)
            if position is None:
                continue
            stores = _block_stores(ctx, parent, field).get(name, [])
            at = bisect.bisect_left(stores, position, key=lambda entry: entry[0])
            if not at:
                continue
            statement = stores[at - 1][1]
            if statement is None:
                return None
            return None if _rebound_between(ctx, scope, name, statement, use_line) else statement.value
        if isinstance(parent, FUNCTIONS):
            break
    return None


_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
# Calls whose result carries no autograd graph back to their receiver.
_GRAPH_BREAKERS = frozenset({"detach", "item", "tolist", "numpy"})
_COMPOUND = (*LOOPS, ast.If, ast.With, ast.AsyncWith, ast.Try)
_BACKWARD_FUNCTIONS = frozenset({"torch.autograd.backward"})


def runs_without_grad(ctx: FileContext, ancestors: Sequence[ast.AST]) -> bool:
    """Inside `with torch.no_grad():` / `inference_mode()` / `set_grad_enabled(False)`, or in a function decorated
    with no_grad or inference_mode."""
    for node in ancestors:
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                expr = item.context_expr
                call = expr if isinstance(expr, ast.Call) else None
                name = ctx.qualified_name(call.func if call else expr, ancestors) or ""
                if name in _NO_GRAD:
                    return True
                if name == "torch.set_grad_enabled" and call and call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value is False:
                    return True
        if isinstance(node, FUNCTIONS):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (ctx.qualified_name(target, ancestors) or "") in _NO_GRAD:
                    return True
    return False


def _mentions_graph_of(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` reads one of the names in a way that keeps the autograd graph (`out.detach()` does not)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GRAPH_BREAKERS:
        return False
    if isinstance(node, ast.Name):
        return node.id in names
    return any(_mentions_graph_of(child, names) for child in ast.iter_child_nodes(node))


def _backward_of(ctx: FileContext, call: ast.Call, ancestors: Sequence[ast.AST], names: set[str], start: ast.AST | None) -> bool:
    """`loss.backward()`, `scaler.scale(loss).backward()`, `accelerator.backward(loss)`, `torch.autograd.backward(loss)`
    on a value that holds one of the names (or on `start`, the expression followed)."""
    def holds(node: ast.AST) -> bool:
        return (start is not None and any(inner is start for inner in ast.walk(node))) or _mentions_graph_of(node, names)

    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "backward":
        if holds(func.value) and not (isinstance(func.value, ast.Name) and func.value.id in ("self",)):
            return True
        return any(holds(a) for a in call.args)  # accelerator.backward(loss), fabric.backward(loss)
    if (ctx.qualified_name(func, ancestors) or "") in _BACKWARD_FUNCTIONS:
        return any(holds(a) for a in call.args)
    return False


def _simple_statements(ctx: FileContext, owner: ast.AST) -> list[ast.stmt]:
    """The statements of a function (or module) body that are not compound, in source order; built once per scope, so
    that following a value from each of many calls does not sort the scope each time."""
    key = ("simple-statements", id(owner))
    if key not in ctx.memo:
        ctx.memo[key] = sorted(
            (n for n in walk_same_scope(getattr(owner, "body", [])) if isinstance(n, ast.stmt) and not isinstance(n, _COMPOUND)),
            key=lambda n: (n.lineno, n.col_offset),
        )
    return ctx.memo[key]  # type: ignore[return-value]


def reaches_backward(ctx: FileContext, value: ast.expr, ancestors: Sequence[ast.AST]) -> ast.Call | None:
    """The `backward()` call that the autograd graph of `value` reaches in the same function, following the names
    it is assigned to in source order (`out = model(x)`, `loss = criterion(out, y)`, `loss.backward()`)."""
    function = next((a for a in reversed(ancestors) if isinstance(a, FUNCTIONS)), None)
    owner = function if function is not None else ancestors[0] if ancestors else None
    statement = next((a for a in reversed(ancestors) if isinstance(a, ast.stmt)), None)
    if statement is None or owner is None or isinstance(statement, _COMPOUND):
        return None  # a compound statement's header (`for x in model(y):`) is not followed
    names: set[str] = set()
    line = statement.lineno
    statements = _simple_statements(ctx, owner)
    first = bisect.bisect_left(statements, line, key=lambda n: n.lineno)
    for index in range(first, len(statements)):  # not islice, which would step through the first statements
        current = statements[index]
        if current is not statement and not names and current.lineno > line:
            return None  # the value was not stored: nothing later can carry its graph
        start = value if current is statement else None
        if current is not statement and current.lineno == line:
            continue
        for node in ast.walk(current):
            if isinstance(node, ast.Call) and _backward_of(ctx, node, ancestors, names, start):
                return node
        if isinstance(current, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and current.value is not None:
            source_holds = start is not None and any(inner is start for inner in ast.walk(current.value))
            if source_holds or _mentions_graph_of(current.value, names):
                targets = current.targets if isinstance(current, ast.Assign) else [current.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return None


_IN_PLACE_UPDATES = frozenset({"add_", "sub_", "copy_", "mul_", "addcdiv_", "addcmul_", "lerp_"})


def updates_parameters(function: Function) -> bool:
    """Whether a function may change parameters after a backward: an optimizer's (or a scaler's) `step`, or an
    in-place update of a tensor (`p.data.sub_(lr * p.grad)`, `p -= lr * p.grad`). Without one, gradients are only
    read: a test that compares them, whatever their rank."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "step" or node.func.attr in _IN_PLACE_UPDATES:
                return True
        elif isinstance(node, ast.AugAssign) and (not isinstance(node.target, ast.Name) or isinstance(node.op, ast.Sub)):
            return True  # `p.data -= ...`, `self.w *= ...`, or `p -= lr * p.grad` over the parameters
    return False

