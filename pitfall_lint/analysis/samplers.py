"""Data loading under DDP: DataLoaders, DistributedSamplers, where a sampler's loader goes, epoch loops.

The data flow is deliberately shallow and file-local: a sampler is followed through assignments (names,
`self.` attributes), conditional expressions, wrappers such as `BatchSampler(sampler)`, `sampler=`/
`batch_sampler=` of a DataLoader (also through a `**kwargs` dict), `return`, and arguments of functions
and classes defined in the same file. Whatever leaves the file is not followed, so the rules built on it
stay quiet rather than guess.
"""

from __future__ import annotations

import ast
import bisect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import FUNCTIONS, Function, self_name
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.context import FileContext

DISTRIBUTED_SAMPLERS = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
)
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, ...)
LOADER_SAMPLER_POSITIONS = {"sampler": 3, "batch_sampler": 4}
# DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last)
SAMPLER_POSITIONS = {"dataset": 0, "num_replicas": 1, "rank": 2, "shuffle": 3, "seed": 4, "drop_last": 5}

_FRAMEWORK_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
_FRAMEWORK_ROOT_BYTES = tuple(root.encode() for root in _FRAMEWORK_ROOTS)
_PREPARE = re.compile(rb"\bprepare\b")  # `accelerator.prepare(...)`, not `prepare_model_for_kbit_training`
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_MAX_DEPTH = 3


def call_argument(call: ast.Call, keyword: str, position: int | None) -> ast.expr | None:
    """The argument passed as `keyword=` or at `position`, None when it is not passed."""
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    if position is not None and position < len(call.args) and not any(
        isinstance(a, ast.Starred) for a in call.args[: position + 1]
    ):
        return call.args[position]
    return None


def has_unpacked_arguments(call: ast.Call) -> bool:
    """`f(*args)` or `f(**kwargs)`: any keyword may be hidden in them."""
    return any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)


def is_constant(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _qualified(ctx: FileContext, node: ast.AST) -> str | None:
    return ctx.qualified_name(node, ancestors_of(ctx, node))


def is_distributed_sampler(ctx: FileContext, call: ast.AST) -> bool:
    return isinstance(call, ast.Call) and _qualified(ctx, call.func) in DISTRIBUTED_SAMPLERS


def is_data_loader(ctx: FileContext, call: ast.AST) -> bool:
    return isinstance(call, ast.Call) and _qualified(ctx, call.func) in DATA_LOADERS


def uses_loader_framework(ctx: FileContext) -> bool:
    """Lightning (Trainer, Fabric) and Accelerate replace the sampler and call set_epoch themselves."""
    key = ("uses-loader-framework",)
    if key not in ctx.memo:
        found = False
        data = ctx.text.data
        # The cheap look first (source that is not ASCII is not judged: NFKC can spell the names otherwise).
        named = not data.isascii() or _PREPARE.search(data) is not None or any(root in data for root in _FRAMEWORK_ROOT_BYTES)
        for node in ast.walk(ctx.tree) if named else ():
            if isinstance(node, ast.Import):
                found = any(a.name.partition(".")[0] in _FRAMEWORK_ROOTS for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                found = node.level == 0 and (node.module or "").partition(".")[0] in _FRAMEWORK_ROOTS
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                found = node.func.attr == "prepare" and "accelerator" in ast.unparse(node.func.value).lower()
            if found:
                break
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


# --- file-local functions and classes -------------------------------------------------------------


def _definitions(ctx: FileContext) -> dict[str, list[Function | ast.ClassDef]]:
    """Every function, method and class of the file by name."""
    key = ("samplers-definitions",)
    if key not in ctx.memo:
        found: dict[str, list[Function | ast.ClassDef]] = {}
        for node in ast.walk(ctx.tree):
            if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                found.setdefault(node.name, []).append(node)
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _enclosing(ancestors: Sequence[ast.AST], kinds: tuple[type[ast.AST], ...]) -> ast.AST | None:
    return next((a for a in reversed(ancestors) if isinstance(a, kinds)), None)


def _method_self(ancestors: Sequence[ast.AST]) -> tuple[ast.ClassDef, str] | None:
    """The class and instance name of the method enclosing a node (`self` in `def f(self)`)."""
    for index in range(len(ancestors) - 1, 0, -1):
        node, parent = ancestors[index], ancestors[index - 1]
        if isinstance(node, FUNCTIONS) and isinstance(parent, ast.ClassDef):
            name = self_name(node)
            return (parent, name) if name else None
    return None


def called_definitions(ctx: FileContext, call: ast.Call) -> list[Function]:
    """The functions of this file that a call may run: `f(...)`, `self.f(...)`, `Cls(...)` (its __init__)."""
    definitions = _definitions(ctx)
    if isinstance(call.func, ast.Name):
        found = definitions.get(call.func.id, [])
        functions: list[Function] = []
        for item in found:
            if isinstance(item, ast.ClassDef):
                functions.extend(n for n in item.body if isinstance(n, FUNCTIONS) and n.name == "__init__")
            elif not _is_method(ctx, item):
                functions.append(item)
        return functions
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name):
        owner = _method_self(ancestors_of(ctx, call))
        if owner is not None and call.func.value.id == owner[1]:
            cls = owner[0]
            return [n for n in cls.body if isinstance(n, FUNCTIONS) and n.name == call.func.attr]
    return []


def _is_method(ctx: FileContext, function: Function) -> bool:
    ancestors = ancestors_of(ctx, function)
    return bool(ancestors) and isinstance(ancestors[-1], ast.ClassDef)


def call_sites(ctx: FileContext, function: Function) -> list[ast.Call]:
    """Calls of a same-file function: by name for functions, through the instance for methods."""
    key = ("samplers-call-sites", id(function))
    if key not in ctx.memo:
        method = _is_method(ctx, function)
        by_name = _calls_by_name(ctx)[1 if method else 0].get(function.name, [])
        ctx.memo[key] = [node for node in by_name if function in called_definitions(ctx, node)]
    return ctx.memo[key]  # type: ignore[return-value]


def _calls_by_name(ctx: FileContext) -> tuple[dict[str, list[ast.Call]], dict[str, list[ast.Call]]]:
    """The file's calls `f(...)` by `f`, and `x.f(...)` by `f`."""
    key = ("samplers-calls-by-name",)
    if key not in ctx.memo:
        plain: dict[str, list[ast.Call]] = {}
        attribute: dict[str, list[ast.Call]] = {}
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name):
                    plain.setdefault(node.func.id, []).append(node)
                elif isinstance(node.func, ast.Attribute):
                    attribute.setdefault(node.func.attr, []).append(node)
        ctx.memo[key] = (plain, attribute)
    return ctx.memo[key]  # type: ignore[return-value]


def _parameter_for(ctx: FileContext, function: Function, call: ast.Call, argument: ast.AST) -> str | None:
    """The parameter of `function` that receives `argument` at this call."""
    parameters = [*function.args.posonlyargs, *function.args.args]
    if _is_method(ctx, function) and self_name(function) is not None:
        parameters = parameters[1:]  # the instance
    for item in call.keywords:
        if item.value is argument:
            return item.arg
    for index, value in enumerate(call.args):
        if isinstance(value, ast.Starred):
            return None
        if value is argument:
            return parameters[index].arg if index < len(parameters) else None
    return None


# --- references: names and `self.` attributes a value is stored in -------------------------------


Position = tuple[int, int]


@dataclass(frozen=True)
class Ref:
    """A place a value is stored: a name in a function (or the module), or `self.<attr>` in a class.

    A name holds the value from `since` (where its binding takes effect) to the next binding of the name in the
    scope, by position in the source; loads in functions nested in the scope count for its last binding. Without
    `since` (an attribute) every load of the place counts.
    """

    key: str
    scope: ast.AST
    attribute: bool = False
    since: Position | None = None

    def uses(self, ctx: FileContext) -> Iterable[ast.expr]:
        """The loads of this place in its scope."""
        if self.attribute:
            return _attribute_loads(ctx, self.scope).get(self.key, [])
        bindings = _name_bindings(ctx, self.scope)
        if self.since is None:
            return bindings.every_load.get(self.key, [])
        return bindings.loads.get(self.key, {}).get(self.since, [])

    @property
    def spelling(self) -> str:
        return f"self.{self.key}" if self.attribute else self.key


def _end(node: ast.AST) -> Position:
    return (getattr(node, "end_lineno", None) or 0, getattr(node, "end_col_offset", None) or 0)


def _start(node: ast.AST) -> Position:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


@dataclass
class _NameBindings:
    """Where each name of a scope is bound, and which binding each of its loads reads."""

    at: dict[int, Position]  # id of a binding's target Name (or of the function, for its parameters) -> position
    loads: dict[str, dict[Position, list[ast.Name]]]
    every_load: dict[str, list[ast.Name]]


def _binding_positions(scope: ast.AST) -> Iterator[tuple[str, Position, ast.AST]]:
    """(name, where the binding takes effect, the node to look it up by) for the scope's own bindings: an
    assignment's after its value, a loop variable's after the iterable, a `with ... as`'s after its item."""
    if isinstance(scope, FUNCTIONS):
        arguments = scope.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        for argument in every:
            if argument is not None:
                yield argument.arg, _start(scope), scope
    for node in walk_same_scope(getattr(scope, "body", [])):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            yield from ((n.id, _end(node), n) for t in targets for n in _names(t))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            yield from ((n.id, _end(node.iter), n) for n in _names(node.target))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    yield from ((n.id, _end(item), n) for n in _names(item.optional_vars))
        elif isinstance(node, ast.NamedExpr):
            yield node.target.id, _end(node), node.target
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield (alias.asname or alias.name).partition(".")[0], _end(node), alias
        elif isinstance(node, (*FUNCTIONS, ast.ClassDef)) and node is not scope:
            yield node.name, _end(node), node


def _names(target: ast.AST) -> list[ast.Name]:
    return [n for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))]


def _name_bindings(ctx: FileContext, scope: ast.AST) -> _NameBindings:
    key = ("samplers-name-bindings", id(scope))
    if key in ctx.memo:
        return ctx.memo[key]  # type: ignore[return-value]
    at: dict[int, Position] = {}
    positions: dict[str, list[Position]] = {}
    bound_by: dict[tuple[str, Position], ast.AST] = {}
    for name, position, node in _binding_positions(scope):
        at.setdefault(id(node), position)
        positions.setdefault(name, []).append(position)
        bound_by.setdefault((name, position), node)
    for found in positions.values():
        found[:] = sorted(set(found))
    own = {id(n) for n in walk_same_scope(getattr(scope, "body", [])) if isinstance(n, ast.Name)}
    else_spans = sorted(
        (_start(n.orelse[0]), _end(n.orelse[-1]))
        for n in walk_same_scope(getattr(scope, "body", []))
        if isinstance(n, ast.If) and n.orelse
    )
    # Whether a position is in some `else`: the furthest end of the spans that start at or before it reaches it (each
    # load looked through every span of a script of thousands of `if`s).
    else_starts = [start for start, _ in else_spans]
    else_reach = list(itertools.accumulate((end for _, end in else_spans), max))
    loads: dict[str, dict[Position, list[ast.Name]]] = {}
    every_load: dict[str, list[ast.Name]] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            every_load.setdefault(node.id, []).append(node)
            bound = positions.get(node.id)
            if not bound:
                continue
            # A load in the scope's own code reads the binding before it; one in a nested function runs later.
            at_index = bisect.bisect_left(bound, _start(node)) if id(node) in own else len(bound)
            if at_index:
                last = bound[at_index - 1]
                spans_before = bisect.bisect_right(else_starts, last)
                in_else = spans_before > 0 and else_reach[spans_before - 1] >= last  # the cheap look first
                for position in _reaching(ctx, node, last, bound, bound_by) if in_else else [last]:
                    loads.setdefault(node.id, {}).setdefault(position, []).append(node)
    found_bindings = _NameBindings(at, loads, every_load)
    ctx.memo[key] = found_bindings
    return found_bindings


def _reaching(
    ctx: FileContext, load: ast.Name, last: Position, bound: list[Position], bound_by: dict[tuple[str, Position], ast.AST]
) -> list[Position]:
    """The bindings a load may read: the last one before it, and, where that one is in the `else` of an `if` the
    load follows, the last one in the `if` branch too (`if distributed: s = DistributedSampler(d) else: s = None`)."""
    found = [last]
    for position in found:
        node = bound_by.get((load.id, position))
        chain = [*ancestors_of(ctx, node), node] if node is not None else []
        for statement, child in zip(reversed(chain[:-1]), reversed(chain[1:])):
            if isinstance(statement, (*FUNCTIONS, ast.ClassDef, ast.Lambda)) or _start(load) < _end(statement):
                break  # the load is inside this statement: it reads its own branch
            if isinstance(statement, ast.If) and any(child is item for item in statement.orelse):
                start, end = _start(statement.body[0]), _end(statement.body[-1])
                at = bisect.bisect_right(bound, end)
                if at and bound[at - 1] >= start and bound[at - 1] not in found:
                    found.append(bound[at - 1])
    return found


def _attribute_loads(ctx: FileContext, cls: ast.AST) -> dict[str, list[ast.Attribute]]:
    """`self.<attribute>` loads in the class's methods, by attribute."""
    key = ("samplers-attribute-loads", id(cls))
    if key not in ctx.memo:
        found: dict[str, list[ast.Attribute]] = {}
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name)
                and _is_self(ctx, node)
            ):
                found.setdefault(node.attr, []).append(node)
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _is_self(ctx: FileContext, node: ast.Attribute) -> bool:
    owner = _method_self(ancestors_of(ctx, node))
    return owner is not None and isinstance(node.value, ast.Name) and node.value.id == owner[1]


def target_refs(ctx: FileContext, target: ast.expr, ancestors: Sequence[ast.AST]) -> list[Ref]:
    if isinstance(target, ast.Name):
        scope = _enclosing(ancestors, FUNCTIONS) or ctx.tree
        return [Ref(target.id, scope, since=_name_bindings(ctx, scope).at.get(id(target)))]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        owner = _method_self(ancestors)
        if owner is not None and target.value.id == owner[1]:
            return [Ref(target.attr, owner[0], attribute=True)]
    return []


@dataclass
class Flow:
    """Where a sampler ends up: places that hold it, DataLoader calls fed by it, places holding those."""

    sampler_refs: list[Ref]
    loaders: list[ast.Call]
    loader_refs: list[Ref]


def _is_sampler_key(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in LOADER_SAMPLER_POSITIONS


def follow_sampler(ctx: FileContext, sampler: ast.Call) -> Flow:
    """Follow a sampler to the loaders it feeds and to every place that holds one or the other."""
    return _follow(ctx, sampler, "sampler")[0]


def loader_holders(ctx: FileContext, loader: ast.Call) -> list[list[ast.AST]]:
    """The expressions that hold the value of a DataLoader call, each with the way it came there (the call first,
    the holder last): the call itself, the loads of the places it is stored in (names, `self.` attributes, parameters
    of same-file functions it is passed to), the calls of functions that return it."""
    came_from = _follow(ctx, loader, "loader")[1]
    paths = []
    for holder in came_from.values():
        path = [holder[0]]
        while holder[1] is not None:
            holder = came_from[id(holder[1])]
            path.append(holder[0])
        paths.append(path[::-1])
    return paths


def _follow(
    ctx: FileContext, start: ast.Call, kind: str
) -> tuple[Flow, dict[int, tuple[ast.AST, ast.AST | None]]]:
    """The flow of a value, and the expressions that hold it as a loader by id, each with the one it came from."""
    flow = Flow([], [], [])
    holders: dict[int, tuple[ast.AST, ast.AST | None]] = {}
    seen: set[int] = set()
    pending: list[tuple[ast.AST, str, int, ast.AST | None]] = [(start, kind, 0, None)]
    while pending:
        node, node_kind, depth, previous = pending.pop()
        if id(node) in seen or depth > 4 * _MAX_DEPTH:
            continue
        seen.add(id(node))
        if node_kind == "loader":
            holders[id(node)] = (node, previous if previous is not None and id(previous) in holders else None)
        for successor, successor_kind in _successors(ctx, node, node_kind, flow):
            pending.append((successor, successor_kind, depth + 1, node))
    return flow, holders


def _successors(ctx: FileContext, node: ast.AST, kind: str, flow: Flow) -> list[tuple[ast.AST, str]]:
    """The nodes that carry the value of `node` (of the given kind: sampler, kwargs or loader) on."""
    ancestors = ancestors_of(ctx, node)
    if not ancestors:
        return []
    parent = ancestors[-1]
    found: list[tuple[ast.AST, str]] = []

    def store(refs: list[Ref], ref_kind: str) -> None:
        for ref in refs:
            (flow.loader_refs if ref_kind == "loader" else flow.sampler_refs).append(ref)
            found.extend((use, ref_kind) for use in ref.uses(ctx))

    if isinstance(parent, (ast.IfExp, ast.BoolOp)) and node is not getattr(parent, "test", None):
        found.append((parent, kind))
    elif isinstance(parent, ast.Assign) and parent.value is node:
        for target in parent.targets:
            store(target_refs(ctx, target, ancestors[:-1]), kind)
    elif isinstance(parent, (ast.AnnAssign, ast.NamedExpr)) and parent.value is node:
        store(target_refs(ctx, parent.target, ancestors[:-1]), kind)
    elif isinstance(parent, ast.Return):
        function = _enclosing(ancestors, FUNCTIONS)
        if function is not None:
            found.extend((site, kind) for site in call_sites(ctx, function))  # type: ignore[arg-type]
    elif isinstance(parent, ast.Tuple) and len(ancestors) > 1 and isinstance(ancestors[-2], ast.Return):
        function = _enclosing(ancestors, FUNCTIONS)
        for site in call_sites(ctx, function) if function is not None else ():  # type: ignore[arg-type]
            target = _unpacked_into(ctx, site, parent, node)
            if target is not None:
                store(target_refs(ctx, target, ancestors_of(ctx, site)), kind)
    elif isinstance(parent, ast.Dict) and kind == "sampler":
        for key, value in zip(parent.keys, parent.values):
            if value is node and _is_sampler_key(key):
                found.append((parent, "kwargs"))
    elif isinstance(parent, ast.keyword) or (isinstance(parent, ast.Call) and node in parent.args):
        call = ancestors[-2] if isinstance(parent, ast.keyword) else parent
        assert isinstance(call, ast.Call)
        found.extend(_through_call(ctx, call, node, parent, kind, flow))
    return found


def _unpacked_into(ctx: FileContext, site: ast.Call, returned: ast.Tuple, element: ast.AST) -> ast.expr | None:
    """The target that receives one element of a returned tuple: `loader` in `loader, data = make()`."""
    ancestors = ancestors_of(ctx, site)
    assign = ancestors[-1] if ancestors else None
    if not (isinstance(assign, ast.Assign) and assign.value is site and len(assign.targets) == 1):
        return None
    target = assign.targets[0]
    if not isinstance(target, (ast.Tuple, ast.List)) or len(target.elts) != len(returned.elts):
        return None
    if any(isinstance(item, ast.Starred) for item in [*target.elts, *returned.elts]):
        return None
    return next(item for item, value in zip(target.elts, returned.elts) if value is element)


def _through_call(
    ctx: FileContext, call: ast.Call, node: ast.AST, parent: ast.AST, kind: str, flow: Flow
) -> list[tuple[ast.AST, str]]:
    subclass = _loader_subclass_init(ctx, call)
    if subclass is not None:
        if kind == "sampler" and _passes_sampler(call, node, shift=subclass[1]):
            flow.loaders.append(call)
            return [(site, "loader") for site in _constructions(ctx, subclass[0])]
        return []
    if is_data_loader(ctx, call):
        if kind == "kwargs" and isinstance(parent, ast.keyword) and parent.arg is None:
            flow.loaders.append(call)
            return [(call, "loader")]
        if kind == "sampler" and _passes_sampler(call, node):
            flow.loaders.append(call)
            return [(call, "loader")]
        return []
    functions = called_definitions(ctx, call)
    if functions:
        # Into a function or class of this file: the parameter that receives it holds it there.
        found: list[tuple[ast.AST, str]] = []
        for function in functions:
            parameter = _parameter_for(ctx, function, call, node)
            if parameter is not None:
                ref = Ref(parameter, function, since=_start(function))
                (flow.loader_refs if kind == "loader" else flow.sampler_refs).append(ref)
                found.extend((use, kind) for use in ref.uses(ctx))
        return found
    if kind == "sampler" and _is_sampler_wrapper(call) and not (isinstance(parent, ast.keyword) and parent.arg is None):
        # BatchSampler(sampler, ...) and other samplers built on it still draw from it.
        return [(call, kind)]
    return []


def _passes_sampler(call: ast.Call, node: ast.AST, shift: int = 0) -> bool:
    """Whether `node` is the loader's `sampler=` or `batch_sampler=` (`shift`: arguments before the dataset)."""
    return any(call_argument(call, k, p + shift) is node for k, p in LOADER_SAMPLER_POSITIONS.items())


def _loader_subclass_init(ctx: FileContext, call: ast.Call) -> tuple[ast.ClassDef, int] | None:
    """The DataLoader subclass whose `__init__` makes this call to DataLoader's: `super().__init__(dataset, ...)`,
    `super(Loader, self).__init__(...)` or `DataLoader.__init__(self, dataset, ...)` (then 1: the instance comes
    first). None when it is none, or when the class calls set_epoch itself (its `__iter__` owns the epochs)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"):
        return None
    owner = call.func.value
    by_super = isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"
    if not by_super and _qualified(ctx, owner) not in DATA_LOADERS:
        return None
    ancestors = ancestors_of(ctx, call)
    method = _method_self(ancestors)
    function = _enclosing(ancestors, FUNCTIONS)
    if method is None or function is None or function.name != "__init__":  # type: ignore[attr-defined]
        return None
    cls = method[0]
    if not any(_qualified(ctx, base) in DATA_LOADERS for base in cls.bases):
        return None
    if any(isinstance(n, ast.Call) and is_set_epoch(n) for n in ast.walk(cls)):
        return None
    return cls, 0 if by_super else 1


def _constructions(ctx: FileContext, cls: ast.ClassDef) -> list[ast.Call]:
    """The calls of this file that build an instance of the class: `Loader(...)`."""
    return [site for site in _calls_by_name(ctx)[0].get(cls.name, []) if cls in _classes_called(ctx, site)]


def _classes_called(ctx: FileContext, call: ast.Call) -> list[ast.ClassDef]:
    if not isinstance(call.func, ast.Name):
        return []
    return [item for item in _definitions(ctx).get(call.func.id, []) if isinstance(item, ast.ClassDef)]


def _is_sampler_wrapper(call: ast.Call) -> bool:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return "sampler" in name.lower()


# --- iteration and epoch loops ---------------------------------------------------------------------


def iteration_sites(ctx: FileContext, use: ast.expr) -> ast.AST | None:
    """The `for` loop, comprehension or `iter(...)` call that iterates this use of a loader, if any."""
    chain = [*ancestors_of(ctx, use), use]
    for index in range(len(chain) - 2, -1, -1):
        node, child = chain[index], chain[index + 1]
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name in ("len", "range"):
                return None
            if name == "iter" and child in node.args:
                return node
        if isinstance(node, (ast.For, ast.AsyncFor)):
            return node if child is node.iter else None
        if isinstance(node, ast.comprehension):
            return node if child is node.iter else None
        if isinstance(node, (ast.stmt, *FUNCTIONS, ast.Lambda)):
            return None
    return None


def enclosing_loops(
    ctx: FileContext, node: ast.AST, follows: Callable[[ast.Call], bool] = lambda _: True, _depth: int = 0
) -> list[ast.For | ast.AsyncFor | ast.While]:
    """The innermost loop around `node` in its function, or else around the calls of that function that `follows`
    accepts (a rule leaves out the calls made for evaluation, say)."""
    ancestors = ancestors_of(ctx, node)
    for ancestor in reversed(ancestors):
        if isinstance(ancestor, _LOOPS) and not _within(node, getattr(ancestor, "iter", None)):
            return [ancestor]
        if isinstance(ancestor, FUNCTIONS):
            if _depth >= _MAX_DEPTH:
                return []
            loops: list[ast.For | ast.AsyncFor | ast.While] = []
            for site in call_sites(ctx, ancestor):
                if follows(site):
                    loops.extend(enclosing_loops(ctx, site, follows, _depth + 1))
            return loops
    return []


def _within(node: ast.AST, tree: ast.AST | None) -> bool:
    return tree is not None and any(child is node for child in ast.walk(tree))


def calls_in(ctx: FileContext, tree: ast.AST, _depth: int = 0, _seen: set[int] | None = None) -> Iterable[ast.Call]:
    """Every call inside `tree`, and inside the same-file functions it calls (a few levels deep)."""
    seen = _seen if _seen is not None else set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node
            if _depth < _MAX_DEPTH:
                for function in called_definitions(ctx, node):
                    if id(function) not in seen:
                        seen.add(id(function))
                        yield from calls_in(ctx, function, _depth + 1, seen)


def is_set_epoch(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "set_epoch"


# --- names that say what a loader is for --------------------------------------------------------

_EVALUATION_WORD = re.compile(
    r"(?<![a-z])(val(?!ue)|valid|test|eval|predict|infer|inference|calib|bench)", re.IGNORECASE
)
_TRAINING_WORD = re.compile(r"(?<![a-z])train", re.IGNORECASE)


def says_evaluation(text: str) -> bool:
    """A word starting with val, test, eval, ... (`val_loader`, `testloader`, `dataset_val`; not `value`, `latest`)."""
    return bool(_EVALUATION_WORD.search(text.replace("_", " ")))


def says_training(text: str) -> bool:
    """A word starting with train (`train_loader`, `trainset`, `dataset_train`; not `constraint`)."""
    return bool(_TRAINING_WORD.search(text.replace("_", " ")))


def _camel_split(text: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", text)


def describe(texts: Iterable[str]) -> str:
    """Identifiers joined into one string whose words the regular expressions above can see (camelCase split)."""
    return " ".join(_camel_split(t) for t in texts)
