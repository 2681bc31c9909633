"""Which top-level statements can move under `if __name__ == "__main__":` without changing what the program does.

The move the PFL301 fix makes: every top-level statement that may have an effect goes, in its order, under the
guard (the file's own, or a new one at the end); statements that only define (imports, plain functions and
classes, assignments of side-effect-free values) stay where they are. In the parent the effects then run in the
same order, once each; children started with `spawn` (or `forkserver`) import the module again and run only the
definitions, then their target, as children started with `fork` would.

That holds only when the definitions that end up before an effect they used to follow cannot observe it, and when
the children need nothing the effects set up. `plan_main_guard` checks both on names, in one pass over the module
with incremental closures (linear in its size), and gives no plan when it cannot show them:

- a definition that moves ahead of an effect must bind names nothing else binds, that the effects before it do
  not read (directly or through the functions and values they read), and must not read, when it is defined, a
  name those effects bind or could change (an imported module, a class, a list: anything but a constant or a
  function); an import never moves ahead of an effect (the imported module's own code would run earlier);
- the effects before the last start must not bind or change what the children use: the functions and classes the
  starting statements reach, and what those read;
- no definition after the first start may bind a name the children use (a `fork` child would not have it);
- with an existing guard, no definition may sit between it and an effect after it (it would run after the effect).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from pitfall_lint.analysis.processes import (
    EXECUTORS,
    LAUNCHERS,
    PROCESS_CLASSES,
    is_pool,
    loader_workers,
    process_call_name,
)
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.samplers import DATA_LOADERS
from pitfall_lint.analysis.scopes import FUNCTIONS, is_main_guard
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.context import FileContext

# Decorators that only wrap or mark what they decorate: no effect, the same result in every process.
_PURE_DECORATORS = frozenset(
    {
        "staticmethod", "classmethod", "property", "abc.abstractmethod", "dataclasses.dataclass",
        "functools.cache", "functools.lru_cache", "functools.cached_property", "functools.total_ordering",
        "functools.singledispatch", "typing.overload", "typing.final", "typing.runtime_checkable",
        "contextlib.contextmanager", "contextlib.asynccontextmanager", "enum.unique", "torch.no_grad",
        "torch.inference_mode", "torch.enable_grad", "torch.jit.ignore", "torch.jit.unused",
    }
)  # fmt: skip
_ACCESSORS = frozenset({"setter", "getter", "deleter"})  # @value.setter of a property
# Calls without effect whose result is the same in every process (given the same arguments and environment).
_PURE_CALLS = frozenset(
    {
        "dict", "list", "tuple", "set", "frozenset", "str", "int", "float", "bool", "bytes", "range", "len",
        "min", "max", "abs", "round", "sorted", "object", "os.path.join", "os.path.dirname", "os.path.basename",
        "os.path.abspath", "os.path.expanduser", "os.environ.get", "os.getenv", "pathlib.Path",
        "collections.namedtuple", "typing.TypeVar", "typing.NewType", "torch.device", "logging.getLogger",
        "re.compile",
    }
)  # fmt: skip


def _module_names(ctx: FileContext, expr: ast.AST) -> str | None:
    return ctx.qualified_name(expr, [ctx.tree])


def is_pure(ctx: FileContext, node: ast.AST | None) -> bool:
    """An expression without effect: literals, names, attribute and item reads, operators, lambdas (not run), and
    calls of `_PURE_CALLS` with such arguments. Reads and operators are taken as free of effects."""
    if node is None or isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Lambda):
        return all(is_pure(ctx, d) for d in [*node.args.defaults, *node.args.kw_defaults])
    if isinstance(node, ast.Call):
        return _module_names(ctx, node.func) in _PURE_CALLS and all(
            is_pure(ctx, a) for a in [*node.args, *(k.value for k in node.keywords)]
        )
    if isinstance(node, (ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred,
                         ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.JoinedStr,
                         ast.FormattedValue)):  # fmt: skip
        return all(is_pure(ctx, child) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))
    return False


def is_pure_decorator(ctx: FileContext, decorator: ast.expr) -> bool:
    """A decorator that only wraps or marks what it decorates: no effect, nothing registered."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    arguments = [*decorator.args, *(k.value for k in decorator.keywords)] if isinstance(decorator, ast.Call) else []
    if not all(is_pure(ctx, a) for a in arguments):
        return False
    if isinstance(target, ast.Attribute) and target.attr in _ACCESSORS and isinstance(target.value, ast.Name):
        return True
    return _module_names(ctx, target) in _PURE_DECORATORS


def _definition_time_parts(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr | None]:
    """What runs when the `def` runs: decorators, defaults and annotations."""
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return [
        *function.decorator_list,
        *arguments.defaults,
        *arguments.kw_defaults,
        *(a.annotation for a in every if a is not None),
        function.returns,
    ]


def is_definition(ctx: FileContext, statement: ast.stmt) -> bool:
    """A statement that only binds names, with no effect when it runs (in the parent or a re-importing child)."""
    if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(statement, ast.Expr):
        return isinstance(statement.value, ast.Constant)  # a docstring
    if isinstance(statement, FUNCTIONS):
        return all(is_pure_decorator(ctx, d) for d in statement.decorator_list) and all(
            is_pure(ctx, part) for part in _definition_time_parts(statement)[len(statement.decorator_list) :]
        )
    if isinstance(statement, ast.ClassDef):
        return (
            all(is_pure_decorator(ctx, d) for d in statement.decorator_list)
            and all(is_pure(ctx, part) for part in [*statement.bases, *(k.value for k in statement.keywords)])
            and all(is_definition(ctx, s) for s in statement.body)
        )
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        annotation = statement.annotation if isinstance(statement, ast.AnnAssign) else None
        return all(_plain_target(t) for t in targets) and is_pure(ctx, statement.value) and is_pure(ctx, annotation)
    if isinstance(statement, ast.If):
        return is_pure(ctx, statement.test) and all(is_definition(ctx, s) for s in [*statement.body, *statement.orelse])
    if isinstance(statement, ast.Try):
        blocks = [statement.body, statement.orelse, statement.finalbody, *(h.body for h in statement.handlers)]
        return all(is_pure(ctx, h.type) for h in statement.handlers) and all(
            is_definition(ctx, s) for block in blocks for s in block
        )
    return False


def _plain_target(target: ast.expr) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_plain_target(e) for e in target.elts)
    return isinstance(target, ast.Name)


def _loads(nodes: Iterable[ast.AST | None]) -> set[str]:
    return {
        n.id
        for node in nodes
        if node is not None
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _stores(statements: list[ast.stmt]) -> set[str]:
    """The names statements bind in their own scope (a superset: comprehension variables count too)."""
    found: set[str] = set()
    for node in walk_same_scope(statements):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            found.add(node.id)
        elif isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            found.add(node.rest)
    return found


def _run_time_reads(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The global names the body may read when called: every load not bound in the function itself (loads that
    nested functions bind for themselves count too, which only adds names)."""
    body = function.body if isinstance(function.body, list) else [ast.Expr(function.body)]
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    declared = {name for node in walk_same_scope(body) if isinstance(node, ast.Global) for name in node.names}
    local = ({a.arg for a in every if a is not None} | _stores(body)) - declared
    return _loads(body) - local


_POOL_METHODS = frozenset(
    {"map", "imap", "imap_unordered", "starmap", "apply", "apply_async", "map_async", "starmap_async", "submit"}
)
# Last names worth resolving.
_STARTER_NAMES = frozenset({"spawn", "start_processes", "Pool", "Process", "ProcessPoolExecutor", "DataLoader"})


def _is_pool_like(qualified: str | None) -> bool:
    """A pool or an executor: its workers get their work through its methods."""
    return is_pool(qualified) or qualified in EXECUTORS


@dataclass
class _HandOffs:
    """The calls that hand work to child processes, and whether each names its work where this can follow it."""

    calls: list[ast.Call] = field(default_factory=list)
    followed: bool = True  # every call's work is a name (not a local variable), every pool is a module-level one
    arguments: set[int] = field(default_factory=set)  # the Name nodes in their arguments


def _hand_offs(ctx: FileContext) -> _HandOffs:
    """Launchers, `Process(...)`, pools and executors and their `map` and kin, DataLoaders with workers, anywhere in
    the file."""
    pools: dict[str, ast.Call] = {}
    for node in walk_same_scope(ctx.tree.body):  # module-level `with Pool(2) as pool:`, `pool = ...Pool()`
        pairs = (
            [(item.context_expr, item.optional_vars) for item in node.items] if isinstance(node, ast.With)
            else [(node.value, node.targets[0])] if isinstance(node, ast.Assign) and len(node.targets) == 1
            else []
        )  # fmt: skip
        for value, target in pairs:
            if isinstance(value, ast.Call) and isinstance(target, ast.Name):
                if _is_pool_like(process_call_name(ctx, value, [ctx.tree])):
                    pools[target.id] = value
    found = _HandOffs()
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if last in _POOL_METHODS and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id in pools:
                found.calls.append(node)
                found.followed &= isinstance(_work(node, 0, "func"), ast.Name)
            continue
        if last not in _STARTER_NAMES:
            continue
        name = process_call_name(ctx, node, ancestors_of(ctx, node))
        if _is_pool_like(name):
            found.calls.append(node)  # its initializer runs in the children; its work comes through its methods
            found.followed &= any(node is pool for pool in pools.values())
        elif name in DATA_LOADERS:
            if loader_workers(ctx, node) is not None:
                found.calls.append(node)  # its workers get its dataset, sampler, collate_fn, worker_init_fn
        elif name in PROCESS_CLASSES:
            found.calls.append(node)
            found.followed &= isinstance(_work(node, 1, "target"), ast.Name)
        elif name in LAUNCHERS:
            found.calls.append(node)
            found.followed &= isinstance(_work(node, 0, "fn"), ast.Name)
    found.arguments = {id(n) for call in found.calls for n in _argument_names(call)}
    return found


def _work(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    """The function a call hands over: `keyword=` or the argument at `position`."""
    given = next((k.value for k in call.keywords if k.arg == keyword), None)
    return given if given is not None else call.args[position] if len(call.args) > position else None


def _handed_to_children(statement: ast.stmt, hand_offs: _HandOffs) -> set[str]:
    """Names the statement only hands to child processes: a launcher's or a `Process`'s target and arguments, a
    pool's function and data. The parent does not call such a function (the children do, after importing it)."""
    handed = hand_offs.arguments
    loads = [n for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return {n.id for n in loads if id(n) in handed} - {n.id for n in loads if id(n) not in handed}


def _argument_names(call: ast.Call) -> list[ast.Name]:
    return [n for a in [*call.args, *(k.value for k in call.keywords)] for n in ast.walk(a) if isinstance(n, ast.Name)]


@dataclass
class _Statement:
    node: ast.stmt
    index: int
    line: int
    kind: str  # "definition", "effect" (moved) or "guard" (the existing main guard)
    binds: set[str]
    reads: set[str]  # for a definition: what it reads when it runs; for the others: anything they may read
    later_reads: set[str] = field(default_factory=set)  # a definition's function bodies: read when called
    handed: set[str] = field(default_factory=set)  # read only to be handed to child processes, never called here


def _describe(ctx: FileContext, index: int, statement: ast.stmt, guard: bool, hand_offs: _HandOffs) -> _Statement:
    line = statement.lineno  # a decorated definition's `def` line, where libcst places it too
    if guard or not is_definition(ctx, statement):
        handed = _handed_to_children(statement, hand_offs)
        kind = "guard" if guard else "effect"
        return _Statement(statement, index, line, kind, _stores([statement]), _loads([statement]), handed=handed)
    described = _Statement(statement, index, line, "definition", _stores([statement]), set())
    for node in walk_same_scope([statement]):  # the definitions in it (a class body, the branches of an `if`)
        if isinstance(node, FUNCTIONS):
            described.reads |= _loads(_definition_time_parts(node))
            described.later_reads |= _run_time_reads(node)
        elif isinstance(node, ast.ClassDef):
            described.reads |= _loads([*node.decorator_list, *node.bases, *(k.value for k in node.keywords)])
            described.reads |= _loads(s for s in node.body if not isinstance(s, (*FUNCTIONS, ast.ClassDef)))
            for inner in walk_same_scope(node.body):
                if isinstance(inner, FUNCTIONS):
                    described.reads |= _loads(_definition_time_parts(inner))
                    described.later_reads |= _run_time_reads(inner)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.If, ast.Try, ast.ExceptHandler)):
            parts = [getattr(node, name, None) for name in ("value", "annotation", "test", "type")]
            described.reads |= _loads(p for p in parts if isinstance(p, ast.AST))
    return described


class _Closure:
    """Names reachable from seeds through what binds them reads (forward), or that reach a set (backward);
    grown incrementally, each name visited once."""

    def __init__(self, edges: dict[str, set[str]]) -> None:
        self._edges = edges
        self.reached: set[str] = set()

    def grow(self, seeds: Iterable[str]) -> set[str]:
        """Adds the seeds and what they reach; returns the names newly reached."""
        new: set[str] = set()
        todo = [s for s in seeds if s not in self.reached]
        while todo:
            name = todo.pop()
            if name in self.reached:
                continue
            self.reached.add(name)
            new.add(name)
            todo.extend(n for n in self._edges.get(name, ()) if n not in self.reached)
        return new


def _immutable_names(statements: list[_Statement], bound_once: set[str], changed: set[str]) -> set[str]:
    """Names nothing can change: bound once, by a constant (`PORT = 29500`) or a plain function, never stored into."""
    found: set[str] = set()
    for described in statements:
        statement = described.node
        if described.kind != "definition":
            continue
        if isinstance(statement, FUNCTIONS) and not statement.decorator_list:
            found.add(statement.name)
        elif isinstance(statement, ast.Assign) and _is_constant(statement.value):
            found.update(t.id for t in statement.targets if isinstance(t, ast.Name))
    return (found & bound_once) - changed


def _changed_anywhere(ctx: FileContext) -> tuple[set[str], set[str]]:
    """Names declared `global` in a function (its calls rebind them), and names whose object something stores into
    (`f.x = ...`, `del d[k]`, `setattr(f, ...)`)."""
    declared: set[str] = set()
    stored_into: set[str] = set()
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Global):
            declared.update(node.names)
        elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if isinstance(node.value, ast.Name):
                stored_into.add(node.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and isinstance(node.args[0], ast.Name):
                stored_into.add(node.args[0].id)
    return declared, stored_into


def _is_constant(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.UnaryOp, ast.BinOp, ast.JoinedStr, ast.FormattedValue)):
        return all(_is_constant(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
    return False


def _binding_counts(statements: list[_Statement]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for described in statements:
        for name in described.binds:
            counts[name] = counts.get(name, 0) + 1
    return counts


def plan_main_guard(ctx: FileContext, starts: set[int]) -> dict[str, str] | None:
    """The fix plan for the unguarded top-level statements at these indices that start processes: the first lines of
    the statements to move (`move`) and of the existing guard to move them into (`guard`, empty for a new one at the
    end); None when the move cannot be shown to keep what the program does."""
    body = ctx.tree.body
    if any(isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names) for s in body):
        return None  # names this analysis cannot see
    guard = next(
        (i for i, s in enumerate(body) if isinstance(s, ast.If) and is_main_guard(s.test) and not s.orelse), None
    )
    hand_offs = _hand_offs(ctx)
    statements = [_describe(ctx, i, s, i == guard, hand_offs) for i, s in enumerate(body)]
    effects = [s for s in statements if s.kind == "effect"]
    if guard is not None and _definition_between(statements, guard):
        return None
    counts = _binding_counts(statements)
    declared, stored_into = _changed_anywhere(ctx)
    rebound = declared | {name for name, count in counts.items() if count > 1}
    bound_once = {name for name, count in counts.items() if count == 1}
    immutable = _immutable_names(statements, bound_once, stored_into | declared)
    # A bound name leads to what its binding statements read (`edges`), or may call (`calls`: not what they hand
    # to child processes).
    edges: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    for described in statements:
        for name in described.binds:
            edges.setdefault(name, set()).update(described.reads | described.later_reads)
            calls.setdefault(name, set()).update((described.reads - described.handed) | described.later_reads)
    bound = set(edges)
    mutable = bound - immutable
    if not _hoisting_keeps_order(statements, guard, edges, bound, mutable, rebound):
        return None
    if not _children_see_what_fork_children_see(statements, starts, edges, calls, bound, mutable, hand_offs):
        return None
    into = str(statements[guard].line) if guard is not None else ""
    return {"move": ",".join(str(s.line) for s in effects), "guard": into}


def _definition_between(statements: list[_Statement], guard: int) -> bool:
    """A definition after the existing guard and before an effect after it, which the move would put after it."""
    last_effect = max((s.index for s in statements if s.kind == "effect" and s.index > guard), default=guard)
    return any(s.kind == "definition" for s in statements[guard + 1 : last_effect])


def _hoisting_keeps_order(
    statements: list[_Statement],
    guard: int | None,
    edges: dict[str, set[str]],
    bound: set[str],
    mutable: set[str],
    rebound: set[str],
) -> bool:
    """Whether every definition that the move puts before effects it used to follow is blind to those effects."""
    reverse: dict[str, set[str]] = {}
    for name, reads in edges.items():
        for read in reads:
            reverse.setdefault(read, set()).add(name)
    reached = _Closure(edges)  # what the parent-only statements so far read, directly or through what they call
    tainted = _Closure(reverse)  # names whose value could depend on what those statements bound or changed
    bound_so_far: set[str] = set()
    for described in statements:
        if guard is not None and described.index > guard:
            break  # after the guard nothing moves ahead of an effect (`_definition_between`)
        if described.kind != "definition":
            new = reached.grow(described.reads & bound)
            bound_so_far |= described.binds
            tainted.grow((new & mutable) | described.binds)
            continue
        if not bound_so_far and not reached.reached:
            continue  # nothing parent-only before it: it stays ahead of everything it was ahead of
        statement_binds = described.binds
        if _is_import(described) or statement_binds & rebound:
            return False
        if statement_binds & (reached.reached | bound_so_far) or described.reads & tainted.reached:
            return False
    return True


def _is_import(described: _Statement) -> bool:
    """An import, or a definition holding one (`try: import x` ...): moved earlier, the module's own code would
    run earlier."""
    return any(isinstance(node, (ast.Import, ast.ImportFrom)) for node in walk_same_scope([described.node]))


def _children_see_what_fork_children_see(
    statements: list[_Statement],
    starts: set[int],
    edges: dict[str, set[str]],
    calls: dict[str, set[str]],
    bound: set[str],
    mutable: set[str],
    hand_offs: _HandOffs,
) -> bool:
    """Whether re-importing children find what children forked at each start would have inherited: the functions and
    classes handed to them (pickled by reference, so imported again), and what those read."""
    used = _Closure(edges)
    used.grow(_handed_definitions(statements, starts, edges, bound, hand_offs))
    needed = used.reached & bound
    before = _Closure(calls)  # what the parent-only statements before the last start read or may call
    for described in statements[: max(starts)]:
        if described.kind != "definition":
            touched = (before.grow((described.reads - described.handed) & bound) & mutable) | described.binds
            if touched & needed:
                return False
    return not any(s.kind == "definition" and s.binds & needed for s in statements[min(starts) + 1 :])


def _handed_definitions(
    statements: list[_Statement], starts: set[int], edges: dict[str, set[str]], bound: set[str], hand_offs: _HandOffs
) -> set[str]:
    """The module's functions and classes that child processes get: those named in the arguments of the calls that
    hand work over, and those the values handed over were made with (a dataset's class, its instance pickled and
    its methods run in the children). When one of those calls cannot be followed (its work in a local variable, a
    pool kept in a function), every function and class the starting statements reach counts."""
    defined = {
        node.name
        for described in statements
        for node in walk_same_scope([described.node])
        if isinstance(node, (*FUNCTIONS, ast.ClassDef))
    }
    if hand_offs.calls and hand_offs.followed:
        return _made_with({n.id for call in hand_offs.calls for n in _argument_names(call)}, edges, defined)
    reached = _Closure(edges)
    for index in starts:
        reached.grow(statements[index].reads & bound)
    return reached.reached & defined


def _made_with(names: set[str], edges: dict[str, set[str]], defined: set[str]) -> set[str]:
    """The defined names among `names`, and those read where the other names (values) are bound, and so on."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in defined:
            found.add(name)
        else:
            todo.extend(edges.get(name, ()))
    return found
