"""PFL104: forward sets a plain attribute on a DataParallel replica, which is thrown away after the call.

Only writes whose loss can change a result are reported: a value carried from one call to the next (a counter, a
running state read before this call sets it) and a value that another method of the class reads afterwards. Left
alone: a value that the same call sets before reading it, a lazily built cache (set under a test of itself, so a
replica just builds it again), a conversion of the value it already holds (`self.x = self.x.to(device)`), and
in-place updates of buffers, which reach the original through replica 0.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from pitfall_lint.analysis.modules import (
    class_methods,
    data_parallel_reach,
    is_module_class,
    is_torch_module_name,
    registered_name,
    wrapped_at,
)
from pitfall_lint.analysis.scopes import FUNCTIONS, Function, is_name, self_name
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import WrappedModuleRule

_PARAMETERS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
_SET_UP = frozenset({"__init__", "reset_parameters", "_reset_parameters", "__setstate__"})
# `self.x = self.x.to(device)`: the value it already holds, converted; losing it costs a conversion, not a result.
_CONVERSIONS = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "type", "type_as", "contiguous", "detach"})
_EXITS = (ast.Return, ast.Raise)
Position = tuple[int, int]
Branch = tuple[str, bool]  # an `if` test (as source) and whether the node is in its body


@dataclass(frozen=True)
class _Place:
    """Where a node runs in its method: its position, the tests guarding it, the `if` branches it is in."""

    position: Position
    tests: tuple[ast.expr, ...]
    branches: frozenset[Branch]

    def excludes(self, other: _Place) -> bool:
        """One runs only when the other does not (two branches of the same test)."""
        return any((test, not body) in other.branches for test, body in self.branches)

    def no_more_guarded_than(self, other: _Place) -> bool:
        return {id(t) for t in self.tests} <= {id(t) for t in other.tests}


@dataclass
class _Write:
    node: ast.stmt
    attributes: list[str]
    augmented: bool  # `+=` and its kin: read, then written
    reads_itself: set[str]  # `self.x = self.x + 1`, `self.h = f(self.h)`
    place: _Place


@dataclass
class _Method:
    function: Function
    instance: str
    writes: list[_Write] = field(default_factory=list)
    reads: list[tuple[str, _Place]] = field(default_factory=list)
    calls: list[tuple[str, _Place]] = field(default_factory=list)  # self.m(...)


def _position(node: ast.AST) -> Position:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _may_exit(statement: ast.If) -> bool:
    """An `if` whose body can return or raise: what follows it runs only when its test let it through."""
    todo: list[ast.AST] = list(statement.body)
    while todo:
        node = todo.pop()
        if isinstance(node, _EXITS):
            return True
        if not isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _walk(
    node: ast.AST, tests: tuple[ast.expr, ...] = (), branches: frozenset[Branch] = frozenset()
) -> Iterator[tuple[ast.AST, tuple[ast.expr, ...], frozenset[Branch]]]:
    """Every node that runs in the function, with the tests that guard it (those of the `if`s around it and of the
    `if`s before it that may return) and the `if` branches it is in."""
    exits: tuple[ast.expr, ...] = ()
    for name, value in ast.iter_fields(node):
        children = value if isinstance(value, list) else [value]
        for child in children:
            if not isinstance(child, ast.AST) or isinstance(child, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
                continue
            inner_tests, inner_branches = tests + exits, branches
            if isinstance(node, (ast.If, ast.IfExp, ast.While)) and name != "test":
                inner_tests += (node.test,)
                if isinstance(node, ast.If):
                    inner_branches = branches | {(ast.dump(node.test), name == "body")}
            yield child, inner_tests, inner_branches
            yield from _walk(child, inner_tests, inner_branches)
            if isinstance(child, ast.If) and _may_exit(child):
                exits += (child.test,)


def _self_attribute(node: ast.AST, instance: str) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) and is_name(node.value, instance) else None


def _read_names(node: ast.AST, instance: str) -> set[str]:
    """`x` for every `self.x`, `getattr(self, "x")` and `hasattr(self, "x")` read in the node."""
    found = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Attribute) and isinstance(inner.ctx, ast.Load) and is_name(inner.value, instance):
            found.add(inner.attr)
        elif (
            isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in ("getattr", "hasattr")
            and len(inner.args) > 1 and is_name(inner.args[0], instance)
            and isinstance(inner.args[1], ast.Constant) and isinstance(inner.args[1].value, str)
        ):
            found.add(inner.args[1].value)
    return found


def _converts_itself(value: ast.AST, attribute: str, instance: str) -> bool:
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _CONVERSIONS:
        value = value.func.value
    return _self_attribute(value, instance) == attribute


def _read_method(function: Function, instance: str, methods: set[str]) -> _Method:
    method = _Method(function, instance)
    for node, tests, branches in _walk(function):
        place = _Place(_position(node), tests, branches)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flat = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
            attributes = [a for t in flat if (a := _self_attribute(t, instance)) is not None]
            attributes = [a for a in attributes if not _converts_itself(node.value, a, instance)]
            if attributes:
                reads_itself = set(attributes) & _read_names(node.value, instance)
                method.writes.append(_Write(node, attributes, isinstance(node, ast.AugAssign), reads_itself, place))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and is_name(node.value, instance):
            method.reads.append((node.attr, place))
        elif isinstance(node, ast.Call):
            called = _self_attribute(node.func, instance)
            if called in methods:
                method.calls.append((called, place))  # type: ignore[arg-type]
            elif isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
                method.reads += [(name, place) for name in _read_names(node, instance)]
    return method


class _Calls:
    """What each method does to the instance's attributes, through the methods it calls too."""

    def __init__(self, methods: dict[str, _Method]) -> None:
        self.methods = methods
        self._sure: dict[str, set[str]] = {}
        self._sets: dict[str, set[str]] = {}
        self._reads: dict[str, set[str]] = {}
        # Per method and attribute, what touches it where: (place, "read" | "set" | "maybe-set").
        self._touches: dict[str, dict[str, list[tuple[_Place, str]]]] = {}

    def sets_surely(self, name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        """Attributes a method always assigns (outside any test), itself or through methods it always calls."""
        if name not in self._sure:
            method = self.methods[name]
            found = {a for w in method.writes if not w.augmented and not w.place.tests for a in w.attributes}
            for called, place in method.calls:
                if not place.tests and called not in seen | {name}:
                    found |= self.sets_surely(called, seen | {name})
            self._sure[name] = found
        return self._sure[name]

    def sets(self, name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        """Attributes a method may assign, itself or through the methods it calls."""
        if name not in self._sets:
            method = self.methods[name]
            found = {a for w in method.writes if not w.augmented for a in w.attributes}
            for called, _ in method.calls:
                if called not in seen | {name}:
                    found |= self.sets(called, seen | {name})
            self._sets[name] = found
        return self._sets[name]

    def reads(self, name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if name not in self._reads:
            method = self.methods[name]
            found = {a for a, _ in method.reads} | {a for w in method.writes for a in (w.attributes if w.augmented else w.reads_itself)}
            for called, _ in method.calls:
                if called not in seen | {name}:
                    found |= self.reads(called, seen | {name})
            self._reads[name] = found
        return self._reads[name]

    def first_touch(self, name: str, attribute: str, before: _Place) -> str | None:
        """"read" or "set": what the method does first to the attribute before the given place (set: surely, in a
        branch that runs whenever that place does); None when it does neither."""
        events = [
            (place.position, kind)
            for place, kind in self._touches_of(name).get(attribute, ())
            if place.position < before.position and not place.excludes(before)
            and (kind != "maybe-set" or place.no_more_guarded_than(before))
        ]
        return min(events)[1].replace("maybe-", "") if events else None

    def _touches_of(self, name: str) -> dict[str, list[tuple[_Place, str]]]:
        if name not in self._touches:
            method = self.methods[name]
            touches: dict[str, list[tuple[_Place, str]]] = {}
            for read, place in method.reads:
                touches.setdefault(read, []).append((place, "read"))
            for write in method.writes:
                for attribute in write.attributes:
                    kind = "read" if write.augmented or attribute in write.reads_itself else "maybe-set"
                    touches.setdefault(attribute, []).append((write.place, kind))
            for called, place in method.calls:
                for attribute in self.sets_surely(called):
                    touches.setdefault(attribute, []).append((place, "maybe-set"))
                for attribute in self.reads(called):  # after a sure set at the same place, in min()'s order
                    touches.setdefault(attribute, []).append((place, "read"))
            self._touches[name] = touches
        return self._touches[name]


class DpStateMutationInForward(WrappedModuleRule):
    info = RuleInfo(
        code="PFL104",
        name="dp-state-mutation-in-forward",
        summary="forward of a module that nn.DataParallel runs sets a plain attribute that outlives the call: the replicas' changes are lost.",
        severity="warning",
        hint="keep the state in a buffer updated in place (`self.register_buffer(...)`, then `self.count += 1`), or return it from forward",
        verifiable=True,
    )
    triggers = (("class",), ("forward",))
    subscriptions = (ast.ClassDef,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.ClassDef)
        functions = {f.name: f for f in node.body if isinstance(f, FUNCTIONS)}
        if "forward" not in functions:
            return
        ancestors = [*self.ctx.ancestors, node]
        if not is_module_class(self.ctx, node, ancestors):
            return
        # Asked before the methods are read: in a project that never wraps in DataParallel, no class needs reading.
        reach = data_parallel_reach(self.ctx, node, ancestors, told_only=True)
        if reach is None:
            return
        kinds = class_methods(self.ctx, node)
        names = {name for name, kind in kinds.items() if kind == "method"} & set(functions)
        methods = {
            name: _read_method(functions[name], instance, names)
            for name in names
            if (instance := self_name(functions[name])) is not None
        }
        if "forward" not in methods:
            return
        tree = self._forward_tree(methods)
        if not any(methods[m].writes for m in tree):
            return
        where, related = wrapped_at(self.ctx, reach)
        registered, in_place = self._registered(methods)
        properties = {name for name, kind in kinds.items() if kind == "property"}
        calls = _Calls(methods)
        written_under = self._written_under(methods, tree, calls)
        outside = {name for name in methods if name not in tree and name not in _SET_UP}
        for name, (path, guards) in tree.items():
            method = methods[name]
            for write in method.writes:
                if self._builds_module(write.node):
                    continue
                for attribute in write.attributes:
                    if attribute in registered or attribute in properties:
                        continue
                    if write.augmented and attribute in in_place:
                        continue  # an in-place update of a buffer or tensor: replica 0 shares the original's storage
                    tests = guards + write.place.tests
                    if not write.augmented and any(
                        _read_names(test, method.instance) & written_under.get(id(test), set()) for test in tests
                    ):
                        continue  # a lazily built cache: a replica builds it again
                    carried = self._carried(calls, path, name, write, attribute)
                    readers = sorted(m for m in outside if any(a == attribute for a, _ in methods[m].reads))
                    if carried or readers:
                        message = self._message(node.name, name, write, attribute, carried, readers, where)
                        self.report(write.node, message, related=related)
                        break  # one finding per statement

    @staticmethod
    def _forward_tree(methods: dict[str, _Method]) -> dict[str, tuple[list[tuple[str, _Place]], tuple[ast.expr, ...]]]:
        """The methods forward runs through `self`: for each, the calls that lead to it and the tests around them."""
        tree: dict[str, tuple[list[tuple[str, _Place]], tuple[ast.expr, ...]]] = {"forward": ([], ())}
        todo = ["forward"]
        while todo:
            caller = todo.pop(0)
            path, guards = tree[caller]
            for called, place in methods[caller].calls:
                if called in methods and called not in tree:
                    tree[called] = ([*path, (caller, place)], guards + place.tests)
                    todo.append(called)
        return tree

    @staticmethod
    def _written_under(methods: dict[str, _Method], tree: dict, calls: _Calls) -> dict[int, set[str]]:
        """For each test in the forward tree, the attributes assigned under it, directly or in the methods it calls."""
        under: dict[int, set[str]] = {}
        for name in tree:
            method = methods[name]
            for write in method.writes:
                for test in write.place.tests if not write.augmented else ():
                    under.setdefault(id(test), set()).update(write.attributes)
            for called, place in method.calls:
                for test in place.tests:
                    under.setdefault(id(test), set()).update(calls.sets(called))
        return under

    @staticmethod
    def _carried(calls: _Calls, path: list[tuple[str, _Place]], name: str, write: _Write, attribute: str) -> bool:
        """Whether the call reads the attribute before it sets it: a value carried over from the previous call."""
        for caller, place in [*path, (name, write.place)]:
            touch = calls.first_touch(caller, attribute, place)
            if touch is not None:
                return touch == "read"
        return write.augmented or attribute in write.reads_itself

    def _registered(self, methods: dict[str, _Method]) -> tuple[set[str], set[str]]:
        """Names held as parameters or submodules (not plain attributes), and those whose `+=` is in place (buffers,
        and attributes first set to a tensor)."""
        registered: set[str] = set()
        buffers: set[str] = set()
        tensors: set[str] = set()
        for method in methods.values():
            for node, _, _ in _walk(method.function):
                name = registered_name(node, method.instance)
                if name is not None:
                    registered.add(name)
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
                        buffers.add(name)
            for write in method.writes:
                if self._builds_module(write.node):
                    registered.update(write.attributes)
                elif method.function.name in _SET_UP and self._makes_tensor(write.node):
                    tensors.update(write.attributes)
        return registered - buffers, buffers | tensors

    def _builds_module(self, statement: ast.stmt) -> bool:
        """`self.x = nn.Parameter(...)` or `self.x = nn.Linear(...)`: registered on the module, not a plain attribute."""
        value = getattr(statement, "value", None)
        if not isinstance(value, ast.Call):
            return False
        called = self.ctx.qualified_name(value.func) or ""
        return called in _PARAMETERS or is_torch_module_name(called)

    def _makes_tensor(self, statement: ast.stmt) -> bool:
        value = getattr(statement, "value", None)
        called = self.ctx.qualified_name(value.func) if isinstance(value, ast.Call) else None
        return called is not None and called.startswith("torch.") and not is_torch_module_name(called)

    @staticmethod
    def _message(cls: str, method: str, write: _Write, attribute: str, carried: bool, readers: list[str], where: str) -> str:
        statement = ast.unparse(write.node).splitlines()[0]
        shown = statement if len(statement) <= 60 else f"{statement[:57]}..."
        place = f"`{cls}.forward`" if method == "forward" else f"`{cls}.{method}` (run by `forward`)"
        head = f"`{shown}` in {place}: nn.DataParallel runs forward on replicas{where} that are thrown away after the call"
        if carried and (write.augmented or attribute in write.reads_itself):
            return (
                f"{head}, so the original's `{attribute}` never changes (it keeps its initial value); keep it in a "
                "buffer updated in place (`register_buffer`, then `+=` or `.add_()`), or update it outside the model"
            )
        if carried:
            return (
                f"{head}, so the next call reads the original's old `{attribute}`, not this one's; return the new "
                "value from forward and pass it back in"
            )
        shown_readers = ", ".join(f"`{r}()`" for r in readers[:3])
        return (
            f"{head}, so the original's `{attribute}`, which {shown_readers} read{'s' if len(readers) == 1 else ''}, "
            "is never set; return it from forward instead"
        )
