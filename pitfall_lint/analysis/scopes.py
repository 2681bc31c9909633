"""Scopes: the enclosing function, method and class of a node, and what a scope binds, indexed for lookups."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pitfall_lint.context import FileContext

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = ast.FunctionDef | ast.AsyncFunctionDef


def decorator_names(function: Function | ast.ClassDef) -> list[str]:
    """Dotted names of the decorators, call or not (`@rank_zero_only`, `@torch.no_grad()`)."""
    names = []
    for decorator in function.decorator_list:
        callee = decorator.func if isinstance(decorator, ast.Call) else decorator
        target, parts = callee, list[str]()
        while isinstance(target, ast.Attribute):
            parts.append(target.attr)
            target = target.value
        # A dotted name is joined (what ast.unparse gives it, at a fraction of the cost); anything else is unparsed.
        names.append(".".join([target.id, *reversed(parts)]) if isinstance(target, ast.Name) else ast.unparse(callee))
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


# Indexes of a scope or a block, built on first use and kept as long as the tree lives, so that each query is a
# lookup (a bisect at most) instead of a walk: a file's analyses stay linear in its size however often they ask. They
# are kept on the node itself: a table keyed by weak references made a reference at each lookup, and a callback for
# each indexed node when its tree was freed (5 % of a check of Lightning).
_INDEXES = "_pitfall_lint_indexes"
T = TypeVar("T")


def _indexed(node: ast.AST, key: object, build: Callable[[], T]) -> T:
    table: dict[object, Any] | None = node.__dict__.get(_INDEXES)
    if table is None:
        table = {}
        setattr(node, _INDEXES, table)
    if key not in table:
        table[key] = build()
    return table[key]  # type: ignore[no-any-return]


Binding = ast.Assign | ast.With | ast.AsyncWith


def _assignments_in(scope: ast.AST) -> list[Binding]:
    found: list[Binding] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Assign, ast.With, ast.AsyncWith)):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def assignments_in(scope: ast.AST) -> list[Binding]:
    """Assignments (and `with ... as` bindings) that run in this scope itself, not in the functions or classes it
    defines (shared: do not modify)."""
    return _indexed(scope, "assignments", lambda: _assignments_in(scope))


def bound_pairs(node: Binding) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) of each binding: `with io.BytesIO() as f:` binds `f` to what the expression gives."""
    if isinstance(node, ast.Assign):
        return [(target, node.value) for target in node.targets]
    return [(item.optional_vars, item.context_expr) for item in node.items if item.optional_vars is not None]


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
        for block_name in _BLOCKS:
            block = getattr(node, block_name, None)
            if type(block) is list:
                found += [s for s in block if isinstance(s, ast.stmt)]
                todo += block
    return found


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


def _timelines(assignments: Iterable[Binding], unpacked: bool) -> dict[str, _Timeline]:
    timelines: dict[str, _Timeline] = {}
    for node in sorted(assignments, key=lambda n: n.lineno):  # stable: a line's assignments keep their order
        pairs = bound_pairs(node)
        for name, value in {n: v for t, v in pairs for n in _bound_names(t, unpacked)}.items():
            timeline = timelines.setdefault(name, _Timeline())
            timeline.lines.append(node.lineno)
            timeline.values.append(value)
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
    def every() -> dict[str, _Timeline]:
        return _timelines((n for n in statements_in(scope) if isinstance(n, (ast.Assign, ast.With, ast.AsyncWith))), unpacked)

    timeline = _indexed(scope, ("every-assignment", unpacked), every).get(name)
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


def module_function(module: ast.Module, name: str) -> Function | None:
    """The module's top-level function of this name (the first, if several)."""

    def build() -> dict[str, Function]:
        found: dict[str, Function] = {}
        for statement in module.body:
            if isinstance(statement, FUNCTIONS):
                found.setdefault(statement.name, statement)
        return found

    return _indexed(module, "module-functions", build).get(name)


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
            for target, value in bound_pairs(node):
                if isinstance(target, ast.Name):
                    bound[target.id] = value
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


def parameter_branches(function: Function, node: ast.AST, ancestors: Sequence[ast.AST]) -> list[tuple[list[str], bool]]:
    """[slots, truth] of each `if <parameter>:` (or `if not <parameter>:`) of the function that `node` runs under,
    truth being what the parameter must be for `node` to run: `if safe: ... else: node` gives ([..., "safe"], False).
    A parameter the function assigns to is left out: its value there is no longer the caller's."""
    chain = [*ancestors[ancestors.index(function) + 1 :], node]
    parameters = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    found: list[tuple[list[str], bool]] = []
    for parent, child in pairwise(chain):
        if not isinstance(parent, ast.If):
            continue
        test, truth = parent.test, True
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, truth = test.operand, False
        if not isinstance(test, ast.Name) or test.id not in parameters or _assigned_in(function, test.id):
            continue
        if position_in_block(parent, "orelse", child) is not None:
            truth = not truth
        elif position_in_block(parent, "body", child) is None:
            continue  # the test itself
        found.append((parameter_slots(test, function, ancestors[: ancestors.index(function)]), truth))
    return found


def _assigned_in(function: Function, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(function))


_TRIES = (ast.Try, getattr(ast, "TryStar", ast.Try))


def statements_on_every_path(module: ast.Module) -> list[ast.stmt]:
    """The simple statements that run whenever their function (or the module) does: not under an `if`, a loop or an
    `except`; a `with` block, a `try` body and the `__main__` block count as every path."""
    return _indexed(module, "on-every-path", lambda: _on_every_path(module))


def _on_every_path(module: ast.Module) -> list[ast.stmt]:
    found: list[ast.stmt] = []
    blocks = [module.body, *(n.body for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    while blocks:
        for statement in blocks.pop():
            if isinstance(statement, (ast.With, ast.AsyncWith)):
                blocks.append(statement.body)
            elif isinstance(statement, _TRIES):
                blocks.extend((statement.body, statement.finalbody))  # type: ignore[attr-defined]
            elif isinstance(statement, ast.If):
                blocks += [statement.body] if is_main_guard(statement.test) else []
            elif not isinstance(statement, (ast.For, ast.AsyncFor, ast.While, *FUNCTIONS, ast.ClassDef, ast.Match)):
                found.append(statement)
    return found


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


def preceded_by(
    ctx: FileContext,
    node: ast.AST,
    ancestors: Sequence[ast.AST],
    predicate: Callable[[FileContext, ast.stmt, Sequence[ast.AST]], bool],
) -> bool:
    """Whether a statement before `node`, in one of the blocks that enclose it, satisfies the predicate."""
    chain = [*ancestors, node]
    return any(preceded_in(ctx, chain, index, predicate) for index in range(len(chain) - 1))


def preceded_in(
    ctx: FileContext,
    chain: Sequence[ast.AST],
    index: int,
    predicate: Callable[[FileContext, ast.stmt, Sequence[ast.AST]], bool],
) -> bool:
    """Whether a statement before chain[index + 1], in one of the blocks of chain[index] (its parent; `chain` from
    the root down), satisfies the predicate.

    Each block is read once per predicate (where its first match stands), so that asking for every statement of a
    long block stays linear."""
    parent, child = chain[index], chain[index + 1]
    if not isinstance(child, ast.stmt):  # only statements stand in blocks
        return False
    for field_name in ("body", "orelse", "finalbody"):
        block = getattr(parent, field_name, None)
        if type(block) is not list:
            continue
        key = ("preceded-by", predicate, id(block))
        first = ctx.memo.get(key)
        if first is None:
            # The predicate gets the statements' ancestors (the block's parent and up) to read them in scope.
            scope = chain[: index + 1]
            first = ctx.memo[key] = next((i for i, statement in enumerate(block) if predicate(ctx, statement, scope)), len(block))
        # Where the child stands is looked up only in a block with a match: most blocks have none.
        if first < len(block):  # type: ignore[operator]
            place = position_in_block(parent, field_name, child)
            if place is not None and first < place:  # type: ignore[operator]
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


def _bound_values(statement: ast.stmt) -> list[tuple[str, ast.expr]]:
    """What the statement binds, by name: the value of `name = v`, `name op v` for `name op= v`, and the bare name (a
    value that cannot be told) for a loop or `with` target."""
    if isinstance(statement, ast.Assign):
        return [(t.id, statement.value) for t in statement.targets if isinstance(t, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and statement.value is not None and isinstance(statement.target, ast.Name):
        return [(statement.target.id, statement.value)]
    if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
        name = statement.target.id
        return [(name, ast.copy_location(ast.BinOp(ast.Name(name, ast.Load()), statement.op, statement.value), statement))]
    targets = [statement.target] if isinstance(statement, (ast.For, ast.AsyncFor)) else []
    targets += [item.optional_vars for item in statement.items if item.optional_vars] if isinstance(statement, ast.With) else []
    names = dict.fromkeys(n for t in targets for n in _bound_names(t, True))
    return [(name, ast.copy_location(ast.Name(name, ast.Load()), statement)) for name in names]


def _in_block(parent: ast.AST, index: int, block: list[ast.stmt], child: ast.AST) -> bool:
    return id(child) in _indexed(parent, ("block-members", index), lambda: {id(s) for s in block})


def _branch(test: ast.expr, taken: bool) -> Branch:
    """`if not x:` taken is `if x:` not taken: one branch, however the test is written."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, taken = test.operand, not taken
    return ast.dump(test), taken


def _branches(chain: Sequence[ast.AST]) -> set[Branch]:
    found = set()
    for parent, child in zip(chain, chain[1:]):
        if isinstance(parent, ast.If) and child is not parent.test:
            found.add(_branch(parent.test, position_in_block(parent, "body", child) is not None))
    return found


_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _settled_tests(statement: ast.stmt) -> list[Branch]:
    """The `if` tests whose outcome a statement settles for the statements after it: `assert not distributed` (the
    code after it runs where `if distributed:` did not), `assert a and b`, and `if distributed: raise ...` (or
    return, continue, break) with no else."""
    if isinstance(statement, ast.Assert):
        conjuncts = statement.test.values if isinstance(statement.test, ast.BoolOp) and isinstance(statement.test.op, ast.And) else [statement.test]
        return [_branch(c, True) for c in conjuncts]
    if isinstance(statement, ast.If) and not statement.orelse and isinstance(statement.body[-1], _EXITS):
        return [_branch(statement.test, False)]
    return []


def ruled_out_by_place(test: ast.expr, chain: Sequence[ast.AST]) -> bool:
    """Whether `test` is surely false where the last node of the chain stands: one of its `and` parts contradicts an
    `if` the node is in (or one an assert or an early exit settled before it). `if not fsdp_eval and not is_rank0:
    return` cannot have run inside a later `if fsdp_eval:`."""
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    known = _branches(chain) | _settled_before(chain, ignoring=test)
    return any((tested, not taken) in known for tested, taken in (_branch(c, True) for c in conjuncts))


def _settled_before(chain: Sequence[ast.AST], ignoring: ast.expr | None = None) -> set[Branch]:
    """The tests settled by an assert or an early exit before the last node of the chain, in the blocks around it
    (but the one whose test is `ignoring`)."""
    found: set[Branch] = set()
    for parent, child in zip(chain, chain[1:]):
        if not isinstance(child, ast.stmt):
            continue
        for field_name in ("body", "orelse", "finalbody"):
            place = position_in_block(parent, field_name, child)
            if place is None:
                continue
            block = getattr(parent, field_name)
            # The statements that settle a test, with their tests, once per block: a script of thousands of `if`s
            # read (and printed with ast.dump) every one before each use.
            settling = _indexed(
                parent,
                ("settling", field_name),
                lambda block=block: [
                    (i, s, tests) for i, s in enumerate(block) if isinstance(s, (ast.Assert, ast.If)) and (tests := _settled_tests(s))
                ],
            )
            for index, statement, tests in settling:
                if index >= place:
                    break
                if statement.test is not ignoring:  # type: ignore[attr-defined]
                    found.update(tests)
    return found


_Binding = tuple[ast.stmt, ast.expr, frozenset[Branch], int]  # statement, value, `if` branches on the way, its block


def _scope_bindings(scope: ast.AST) -> dict[str, list[_Binding]]:
    """Every binding in the scope (nested definitions left out), by name, in the order of a walk of its blocks: built
    once per scope, so that each use looks at the bindings of its own name only."""

    def build() -> dict[str, list[_Binding]]:
        found: dict[str, list[_Binding]] = {}

        def walk(block: list[ast.stmt], branches: frozenset[Branch]) -> None:
            for statement in block:
                if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
                    continue
                for name, value in _bound_values(statement):
                    found.setdefault(name, []).append((statement, value, branches, id(block)))
                for inner in _blocks(statement):
                    if isinstance(statement, ast.If):
                        walk(inner, branches | {_branch(statement.test, inner is statement.body)})
                    else:
                        walk(inner, branches)

        for block in _blocks(scope) if not isinstance(scope, ast.Module) else [scope.body]:
            walk(block, frozenset())
        return found

    return _indexed(scope, "scope-bindings", build)


def reaching_values(name: str, scope: ast.AST, use: ast.AST, ancestors: Sequence[ast.AST]) -> list[ast.expr]:
    """The values that `name` may hold at `use` (a node inside `scope`, with its ancestors): the last simple
    assignment that always runs before it, and the conditional ones after that one. An assignment in one branch
    of an `if` does not reach the other branch, nor the other branch of a later `if` on the same test, nor code after
    an `assert` or an early exit that rules its branch out; loops' back edges are not followed. Empty when nothing in
    the scope assigns it first (a parameter, a global)."""
    chain = [*ancestors, use]
    enclosing = {
        id(block)
        for parent, child in zip(chain, chain[1:])
        for index, block in enumerate(_blocks(parent))
        if _in_block(parent, index, block, child)
    }
    exclusive = {(test, not body) for test, body in _branches(chain) | _settled_before(chain)}
    position = (getattr(use, "lineno", 0), getattr(use, "col_offset", 0))
    entries = _scope_bindings(scope).get(name, [])
    # The walk meets the bindings in source order: those before the use end at `cut`; read back from there to the
    # last one that surely ran (in a block that encloses the use), which hides every earlier one.
    places = _indexed(scope, ("binding-places", name), lambda: [(e[0].lineno, e[0].col_offset) for e in entries])
    found: list[ast.expr] = []
    for index in range(bisect.bisect_left(places, position) - 1, -1, -1):
        statement, value, branches, block = entries[index]
        ends_before = (statement.end_lineno or 0, statement.end_col_offset or 0) <= position
        if (ends_before or isinstance(statement, (ast.For, ast.AsyncFor, ast.With))) and not branches & exclusive:
            found.append(value)
            if block in enclosing:
                break
    return found[::-1]


def exclusive_branches(
    first: ast.AST, second: ast.AST, chain_first: Sequence[ast.AST], chain_second: Sequence[ast.AST]
) -> bool:
    """Whether the two nodes sit in different branches of one `if` (or a try body and its handler)."""
    for a, b in zip(chain_first, chain_second, strict=False):
        if a is not b:
            return False
        if isinstance(a, (ast.If, ast.Try)):
            branch_a = _branch_of(a, first, chain_first)
            branch_b = _branch_of(a, second, chain_second)
            if branch_a is not None and branch_b is not None and branch_a != branch_b:
                return True
    return False


def _branch_of(statement: ast.AST, node: ast.AST, chain: Sequence[ast.AST]) -> str | None:
    path = [*chain, node]
    child = path[path.index(statement) + 1] if statement in path[:-1] else None
    for block in ("body", "orelse", "handlers", "finalbody"):
        if child in getattr(statement, block, []):
            return block
    return None
