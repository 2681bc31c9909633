"""Finding the enclosing function, method and class of a node from its ancestors."""

from __future__ import annotations

import ast
import bisect
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pitfall_lint.context import FileContext

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = ast.FunctionDef | ast.AsyncFunctionDef


def decorator_names(function: Function | ast.ClassDef) -> list[str]:
    """Dotted names of the decorators, call or not (`@rank_zero_only`, `@torch.no_grad()`)."""
    names = []
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.append(ast.unparse(target))
    return names


def enclosing_method(ancestors: Sequence[ast.AST]) -> tuple[ast.ClassDef, Function] | None:
    """The innermost function defined directly in a class body, with that class."""
    for index in range(len(ancestors) - 1, 0, -1):
        node, parent = ancestors[index], ancestors[index - 1]
        if isinstance(node, FUNCTIONS) and isinstance(parent, ast.ClassDef):
            return parent, node
    return None


def enclosing_class(ancestors: Sequence[ast.AST]) -> ast.ClassDef | None:
    return next((a for a in reversed(ancestors) if isinstance(a, ast.ClassDef)), None)


def enclosing_function(ancestors: Sequence[ast.AST]) -> Function | None:
    return next((a for a in reversed(ancestors) if isinstance(a, FUNCTIONS)), None)


def scope_path(ancestors: Sequence[ast.AST], node: Function | ast.ClassDef | None = None) -> str:
    """`Trainer.save` for a method: the names of the enclosing classes and functions, then the node's own.

    It names a definition across files in the project model, so it must not depend on anything but the nesting."""
    names = [a.name for a in ancestors if isinstance(a, (ast.ClassDef, *FUNCTIONS))]
    if node is not None:
        names.append(node.name)
    return ".".join(names)


def definition_name(node: Function | ast.ClassDef, ancestors: Sequence[ast.AST]) -> str:
    """The scope path of a definition, given its own ancestors or those of a node inside it."""
    chain = list(ancestors)
    return scope_path(chain[: chain.index(node)] if node in chain else chain, node)


def self_name(method: Function) -> str | None:
    """The name of the instance parameter, None for static and class methods."""
    if {"staticmethod", "classmethod"} & set(decorator_names(method)):
        return None
    positional = [*method.args.posonlyargs, *method.args.args]
    return positional[0].arg if positional else None


def is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def mentions_name(node: ast.AST, name: str) -> bool:
    """Whether `name` is read anywhere inside node, lambdas that rebind it excepted."""
    if isinstance(node, ast.Lambda):
        arguments = node.args
        bound = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        if name in bound:
            return False
    return is_name(node, name) or any(mentions_name(child, name) for child in ast.iter_child_nodes(node))


def assignments_in(scope: ast.AST) -> list[ast.Assign | ast.With | ast.AsyncWith]:
    """Assignments (and `with ... as` bindings) that run in this scope itself, not in the functions or classes it
    defines."""
    found: list[ast.Assign | ast.With | ast.AsyncWith] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Assign, ast.With, ast.AsyncWith)):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def statements_in(scope: ast.AST, definitions: bool = True) -> list[ast.stmt]:
    """Every statement inside the scope, with `definitions` those of the functions and classes it defines too: a
    tenth of the nodes that `ast.walk` visits, for the questions only statements answer (assignments)."""
    found: list[ast.stmt] = []
    todo = [scope]
    while todo:
        node = todo.pop()
        if node is not scope and not definitions and isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            continue
        for field in _BLOCKS:
            block = getattr(node, field, None)
            if type(block) is list:
                found += [s for s in block if isinstance(s, ast.stmt)]
                todo += block
    return found


def _binds(target: ast.expr, name: str, unpacked: bool) -> bool:
    if isinstance(target, ast.Name):
        return target.id == name
    return unpacked and isinstance(target, (ast.Tuple, ast.List)) and any(_binds(e, name, True) for e in target.elts)


# Assignments by name per scope, built once per scope: a lookup is then a binary search, not a walk.
_ASSIGNMENTS: weakref.WeakKeyDictionary[ast.AST, tuple[dict[str, list[tuple[int, ast.expr]]], ...]] = weakref.WeakKeyDictionary()


def _names_in(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _names_in(element)]
    return []


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(scope: ast.AST) -> list[ast.AST]:
    """Every statement under the scope, nested blocks and nested definitions included: assignments are
    statements, so expressions need no visit."""
    found: list[ast.AST] = []
    todo = [scope]
    while todo:
        node = todo.pop()
        for field in _BLOCKS:
            block = getattr(node, field, None)
            if type(block) is list:
                found.extend(block)
                todo.extend(block)
    return found


def _assignment_index(scope: ast.AST, whole: bool) -> tuple[dict[str, list[tuple[int, ast.expr]]], ...]:
    """(direct, unpacked): `name = value` and `name, other = value`, by name, in line order."""
    found = _ASSIGNMENTS.get(scope)
    if found is None:
        direct: dict[str, list[tuple[int, ast.expr]]] = {}
        unpacked: dict[str, list[tuple[int, ast.expr]]] = {}
        for node in _statements(scope) if whole else assignments_in(scope):
            if isinstance(node, ast.Assign):
                bindings = [(target, node.value) for target in node.targets]
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                # `with io.BytesIO() as f:` binds `f` to what the expression gives, for what a value is traced for
                bindings = [(item.optional_vars, item.context_expr) for item in node.items if item.optional_vars is not None]
            else:
                continue
            for target, value in bindings:
                table = direct if isinstance(target, ast.Name) else unpacked
                for name in _names_in(target):
                    table.setdefault(name, []).append((node.lineno, value))
        for table in (direct, unpacked):
            for entries in table.values():
                entries.sort(key=lambda entry: entry[0])
        found = _ASSIGNMENTS[scope] = (direct, unpacked)
    return found


def _last_before(entries: list[tuple[int, ast.expr]], before_line: int) -> tuple[int, ast.expr] | None:
    index = bisect.bisect_left(entries, before_line, key=lambda entry: entry[0])
    return entries[index - 1] if index else None


def local_value(
    name: str, function: Function | None, before_line: int, module: ast.Module | None = None, unpacked: bool = False
) -> ast.AST | None:
    """The last simple assignment to `name` before the given line: in the function, else (if given) at module level.

    With `unpacked`, `name, state = value` counts too, and gives the whole `value`.
    """
    scope: ast.AST | None = function if function is not None else module
    if scope is None:
        return None
    direct, packed = _assignment_index(scope, whole=function is not None)
    found = [e for e in (_last_before(direct.get(name, []), before_line),) if e is not None]
    if unpacked:
        found += [e for e in (_last_before(packed.get(name, []), before_line),) if e is not None]
    return max(found, key=lambda entry: entry[0])[1] if found else None


def parameter_slots(expr: ast.AST, function: Function, ancestors: Sequence[ast.AST], depth: int = 0) -> list[str]:
    """The parameters of `function` that `expr` is built from (through its local variables), as callers pass them:
    the position (a method's `self` not counted) and the name, `["1", "path"]` for `def save(obj, path)`."""
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    keyword_only = {a.arg for a in function.args.kwonlyargs}
    bound_to_instance = bool(ancestors) and isinstance(ancestors[-1], ast.ClassDef) and "staticmethod" not in decorator_names(function)
    offset = 1 if bound_to_instance and positional else 0
    slots: list[str] = []
    for node in ast.walk(expr):
        if not isinstance(node, ast.Name):
            continue
        if node.id in positional and positional.index(node.id) >= offset:
            slots += [str(positional.index(node.id) - offset), node.id]
        elif node.id in keyword_only:
            slots.append(node.id)
        elif depth < 3:
            value = local_value(node.id, function, node.lineno)
            if value is not None:
                slots += parameter_slots(value, function, ancestors, depth + 1)
    return list(dict.fromkeys(slots))


def is_rebound_between(name: str, scope: ast.AST, after_line: int, before_line: int) -> bool:
    """Whether `name` is assigned (or is a loop target) on a line in (after_line, before_line)."""
    return any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store) and after_line < node.lineno < before_line
        for node in ast.walk(scope)
    )


def names_bound_before(function: Function | None, module: ast.Module, before_line: int) -> dict[str, ast.AST | None]:
    """Names usable at a line: the function's parameters (None) and the values assigned before it, latest last."""
    bound: dict[str, ast.AST | None] = {}
    if function is not None:
        args = function.args
        for parameter in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            bound[parameter.arg] = None
    scope: ast.AST = function if function is not None else module
    for node in sorted(assignments_in(scope), key=lambda n: n.lineno):
        if node.lineno < before_line:
            if isinstance(node, ast.Assign):
                bindings = [(target, node.value) for target in node.targets]
            else:
                bindings = [(item.optional_vars, item.context_expr) for item in node.items if item.optional_vars is not None]
            for target, value in bindings:
                if isinstance(target, ast.Name):
                    bound[target.id] = value
    return bound


def is_main_guard(test: ast.expr, equal: bool = True) -> bool:
    """`__name__ == "__main__"` (or, with equal=False, its negation)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq if equal else ast.NotEq):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
    )


def preceded_by(
    ctx: FileContext,
    node: ast.AST,
    ancestors: Sequence[ast.AST],
    predicate: Callable[[FileContext, ast.stmt, Sequence[ast.AST]], bool],
) -> bool:
    """Whether a statement before `node`, in one of the blocks that enclose it, satisfies the predicate.

    Each block is read once per predicate (where its first match stands, and each statement's place), so that
    asking for every statement of a long block stays linear."""
    chain = [*ancestors, node]
    for index, (parent, child) in enumerate(zip(chain, chain[1:])):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if type(block) is list and block:
                key = ("preceded-by", predicate, id(block))
                if key not in ctx.memo:
                    # The predicate gets the statements' ancestors (the block's parent and up) to read them in scope.
                    scope = chain[: index + 1]
                    first = next((i for i, statement in enumerate(block) if predicate(ctx, statement, scope)), len(block))
                    ctx.memo[key] = (first, {id(statement): i for i, statement in enumerate(block)})
                first, places = ctx.memo[key]  # type: ignore[misc]
                place = places.get(id(child))
                if place is not None and first < place:
                    return True
    return False


def _blocks(statement: ast.AST) -> list[list[ast.stmt]]:
    """The statement lists directly inside a statement: bodies, else branches, handlers' and cases' bodies."""
    found = []
    for _, value in ast.iter_fields(statement):
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            found.append(value)
        elif isinstance(value, list):
            found += [item.body for item in value if isinstance(item, (ast.ExceptHandler, ast.match_case))]
    return found


Branch = tuple[str, bool]  # an `if` test (as source) and whether the node is in its body (else its else branch)


def _bound_value(statement: ast.stmt, name: str) -> ast.expr | None:
    """What the statement binds to the name: the value of `name = v`, `name op v` for `name op= v`, and the bare
    name (a value that cannot be told) for a loop or `with` target; None when it does not bind it."""
    if isinstance(statement, ast.Assign) and any(is_name(t, name) for t in statement.targets):
        return statement.value
    if isinstance(statement, ast.AnnAssign) and statement.value is not None and is_name(statement.target, name):
        return statement.value
    if isinstance(statement, ast.AugAssign) and is_name(statement.target, name):
        return ast.copy_location(ast.BinOp(ast.Name(name, ast.Load()), statement.op, statement.value), statement)
    targets = [statement.target] if isinstance(statement, (ast.For, ast.AsyncFor)) else []
    targets += [item.optional_vars for item in statement.items if item.optional_vars] if isinstance(statement, ast.With) else []
    if any(_binds(t, name, unpacked=True) for t in targets):
        return ast.copy_location(ast.Name(name, ast.Load()), statement)
    return None


def _branches(chain: Sequence[ast.AST]) -> set[Branch]:
    found = set()
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, ast.If) and child is not parent.test:
            found.add((ast.dump(parent.test), child in parent.body))
    return found


def reaching_values(name: str, scope: ast.AST, use: ast.AST, ancestors: Sequence[ast.AST]) -> list[ast.expr]:
    """The values that `name` may hold at `use` (a node inside `scope`, with its ancestors): the last simple
    assignment that always runs before it, and the conditional ones after that one. An assignment in one branch
    of an `if` does not reach the other branch, nor the other branch of a later `if` on the same test; loops' back
    edges are not followed. Empty when nothing in the scope assigns it first (a parameter, a global)."""
    chain = [*ancestors, use]
    enclosing = {id(block) for parent, child in zip(chain, chain[1:]) for block in _blocks(parent) if child in block}
    exclusive = {(test, not body) for test, body in _branches(chain)}
    position = (getattr(use, "lineno", 0), getattr(use, "col_offset", 0))
    found: list[tuple[ast.expr, bool]] = []

    def walk(block: list[ast.stmt], branches: frozenset[Branch]) -> None:
        for statement in block:
            if isinstance(statement, (*FUNCTIONS, ast.ClassDef)) or (statement.lineno, statement.col_offset) >= position:
                continue
            value = _bound_value(statement, name)
            ends_before = (statement.end_lineno or 0, statement.end_col_offset or 0) <= position
            if value is not None and (ends_before or isinstance(statement, (ast.For, ast.AsyncFor, ast.With))):
                if not branches & exclusive:
                    found.append((value, id(block) in enclosing))
            for inner in _blocks(statement):
                if isinstance(statement, ast.If):
                    walk(inner, branches | {(ast.dump(statement.test), inner is statement.body)})
                else:
                    walk(inner, branches)

    for block in _blocks(scope) if not isinstance(scope, ast.Module) else [scope.body]:
        walk(block, frozenset())
    last_certain = max((i for i, (_, certain) in enumerate(found) if certain), default=0)
    return [value for value, _ in found[last_certain:]]
