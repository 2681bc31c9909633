"""Scopes: the enclosing function, method and class of a node, and what a scope binds, indexed for lookups."""

from __future__ import annotations

import ast
import bisect
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

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


# Indexes of a scope or a block, built on first use and kept as long as the tree lives, so that each query is a
# lookup (a bisect at most) instead of a walk: a file's analyses stay linear in its size however often they ask.
_INDEXES: weakref.WeakKeyDictionary[ast.AST, dict[object, Any]] = weakref.WeakKeyDictionary()
T = TypeVar("T")


def _indexed(node: ast.AST, key: object, build: Callable[[], T]) -> T:
    table = _INDEXES.get(node)
    if table is None:
        table = _INDEXES[node] = {}
    if key not in table:
        table[key] = build()
    return table[key]  # type: ignore[no-any-return]


def _assignments_in(scope: ast.AST) -> list[ast.Assign]:
    found, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def assignments_in(scope: ast.AST) -> list[ast.Assign]:
    """Assignments that run in this scope itself, not in the functions or classes it defines (shared: do not modify)."""
    return _indexed(scope, "assignments", lambda: _assignments_in(scope))


def _bound_names(target: ast.expr, unpacked: bool) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif unpacked and isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _bound_names(element, True)


@dataclass
class _Timeline:
    """The values one name is assigned in a scope, by line (equal lines in the order a walk meets them)."""

    lines: list[int] = field(default_factory=list)
    values: list[ast.AST] = field(default_factory=list)

    def before(self, line: int) -> ast.AST | None:
        at = bisect.bisect_left(self.lines, line)
        return self.values[at - 1] if at else None


def _timelines(assignments: Iterable[ast.Assign], unpacked: bool) -> dict[str, _Timeline]:
    timelines: dict[str, _Timeline] = {}
    for node in sorted(assignments, key=lambda n: n.lineno):  # stable: a line's assignments keep their order
        for name in dict.fromkeys(n for t in node.targets for n in _bound_names(t, unpacked)):
            timeline = timelines.setdefault(name, _Timeline())
            timeline.lines.append(node.lineno)
            timeline.values.append(node.value)
    return timelines


def local_value(
    name: str, function: Function | None, before_line: int, module: ast.Module | None = None, unpacked: bool = False
) -> ast.AST | None:
    """The last simple assignment to `name` before the given line: in the function, else (if given) at module level.

    With `unpacked`, `name, state = value` counts too, and gives the whole `value`. In a function, assignments in the
    functions nested in it count too.
    """
    scope: ast.AST | None = function if function is not None else module
    if scope is None:
        return None
    if function is None:
        return assigned_before(scope, name, before_line, unpacked)
    every = (n for n in ast.walk(scope) if isinstance(n, ast.Assign))
    timeline = _indexed(scope, ("every-assignment", unpacked), lambda: _timelines(every, unpacked)).get(name)
    return timeline.before(before_line) if timeline is not None else None


def assigned_before(scope: ast.AST, name: str, before_line: int, unpacked: bool = False) -> ast.AST | None:
    """The value of the last assignment to `name` before the line among the scope's own (`assignments_in`)."""
    own = ("own-assignment", unpacked)
    timeline = _indexed(scope, own, lambda: _timelines(assignments_in(scope), unpacked)).get(name)
    return timeline.before(before_line) if timeline is not None else None


def module_assignments(module: ast.Module) -> dict[str, list[ast.Assign]]:
    """The module's top-level `name = value` statements by name, in order (shared: do not modify)."""

    def build() -> dict[str, list[ast.Assign]]:
        found: dict[str, list[ast.Assign]] = {}
        for statement in module.body:
            if isinstance(statement, ast.Assign):
                for name in dict.fromkeys(t.id for t in statement.targets if isinstance(t, ast.Name)):
                    found.setdefault(name, []).append(statement)
        return found

    return _indexed(module, "module-assignments", build)


def is_rebound_between(name: str, scope: ast.AST, after_line: int, before_line: int) -> bool:
    """Whether `name` is assigned (or is a loop target) on a line in (after_line, before_line)."""

    def build() -> dict[str, list[int]]:
        lines: dict[str, list[int]] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                lines.setdefault(node.id, []).append(node.lineno)
        return {name: sorted(found) for name, found in lines.items()}

    stores = _indexed(scope, "stores", build).get(name, [])
    at = bisect.bisect_right(stores, after_line)
    return at < len(stores) and stores[at] < before_line


class ScopeBindings:
    """A function's parameters and the simple assignments of its own body (or of the module's), by name."""

    def __init__(self, function: Function | None, module: ast.Module) -> None:
        scope: ast.AST = function if function is not None else module
        self._parameters: list[str] = []
        if function is not None:
            args = function.args
            self._parameters = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        self._assignments = sorted(assignments_in(scope), key=lambda n: n.lineno)
        self._lines = [n.lineno for n in self._assignments]
        self._timelines = _timelines(self._assignments, unpacked=False)
        # First binding of each name, in binding order: parameters (line 0), then by first assignment.
        self._first: dict[str, int] = dict.fromkeys(self._parameters, 0)
        for name, timeline in self._timelines.items():
            self._first.setdefault(name, timeline.lines[0])
        self._order = sorted(self._first, key=lambda n: (self._first[n], n not in self._parameters))
        self._found: dict[str, list[str]] = {}

    def before(self, line: int) -> dict[str, ast.AST | None]:
        """Names usable at the line, in the order they were first bound, each with its latest value (None: a
        parameter not reassigned)."""
        bound: dict[str, ast.AST | None] = dict.fromkeys(self._parameters)
        for node in self._assignments[: bisect.bisect_left(self._lines, line)]:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = node.value
        return bound

    def is_bound_before(self, name: str, line: int) -> bool:
        return self._first.get(name, line) < line

    def last_bound_where(self, line: int, key: str, matches: Callable[[str, ast.AST | None], bool]) -> str | None:
        """`before(line)` read from its last name: the first whose value at the line matches. `matches` must not
        depend on the line: the names it could ever match are found once per `key`."""
        if key not in self._found:
            self._found[key] = [
                name
                for name in self._order
                if (name in self._parameters and matches(name, None))
                or any(matches(name, value) for value in self._values(name))
            ]
        for name in reversed(self._found[key]):
            if self._first[name] < line:
                timeline = self._timelines.get(name)
                value = timeline.before(line) if timeline is not None else None
                if matches(name, value):
                    return name
        return None

    def _values(self, name: str) -> list[ast.AST]:
        timeline = self._timelines.get(name)
        return timeline.values if timeline is not None else []


def bindings(function: Function | None, module: ast.Module) -> ScopeBindings:
    return _indexed(function if function is not None else module, "bindings", lambda: ScopeBindings(function, module))


def names_bound_before(function: Function | None, module: ast.Module, before_line: int) -> dict[str, ast.AST | None]:
    """Names usable at a line: the function's parameters (None) and the values assigned before it, latest last."""
    return bindings(function, module).before(before_line)


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


def _block_index(parent: ast.AST, field_name: str) -> dict[int, int]:
    return _indexed(
        parent, ("positions", field_name), lambda: {id(s): i for i, s in enumerate(getattr(parent, field_name))}
    )


def position_in_block(parent: ast.AST, field_name: str, child: ast.AST) -> int | None:
    """Where `child` is in `parent.<field_name>` (`body`, `orelse`, ...), None when it is not there."""
    if not isinstance(getattr(parent, field_name, None), list):
        return None
    return _block_index(parent, field_name).get(id(child))


def _first_satisfying(parent: ast.AST, field_name: str, predicate: Callable[[ast.stmt], bool]) -> int:
    def build() -> int:
        block = getattr(parent, field_name)
        return next((i for i, statement in enumerate(block) if predicate(statement)), len(block))

    return _indexed(parent, ("first", field_name, predicate), build)


def preceded_by(node: ast.AST, ancestors: Sequence[ast.AST], predicate: Callable[[ast.stmt], bool]) -> bool:
    """Whether a statement before `node`, in one of the blocks that enclose it, satisfies the predicate (a function
    of the statement alone: its answers are kept per block)."""
    chain = [*ancestors, node]
    for parent, child in zip(chain, chain[1:]):
        for field_name in ("body", "orelse", "finalbody"):
            position = position_in_block(parent, field_name, child)
            if position is not None and _first_satisfying(parent, field_name, predicate) < position:
                return True
    return False
