"""PFL205: a DDP-wrapped module whose forward leaves some parameters without a gradient fails at the next step."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.evidence import WRAPPED_ITSELF, Evidence, snippet
from pitfall_lint.analysis.modules import (
    creates_parameters,
    is_module_class,
    same_file_hierarchy,
    wrap_option,
    wrapped_at,
    wrapper_reach,
)
from pitfall_lint.analysis.scopes import FUNCTIONS, Function, self_name
from pitfall_lint.analysis.training import walk_same_scope
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import WrappedModuleRule
from pitfall_lint.traversal import nodes_of

# Ways of reaching the submodules that a reading of `self.<name>` cannot follow: the class is left alone.
_EVERY_SUBMODULE = frozenset(
    {"modules", "children", "named_modules", "named_children", "parameters", "named_parameters", "_modules", "__dict__",
     "apply", "state_dict", "buffers", "named_buffers", "_parameters"}
)
# Calls that may take `self` without reaching its submodules.
_HARMLESS_WITH_SELF = frozenset({"isinstance", "type", "id", "super", "hasattr", "getattr", "print", "repr", "str"})
_MAX_ENTRIES = 4  # ways into one method that are kept


@dataclass(frozen=True)
class _Condition:
    """A use happens only where `test` is true (`positive`) or false; test None: on an exception, a match case, or
    past an early return the source cannot pin down."""

    test: ast.expr | None
    positive: bool


Conditions = tuple[_Condition, ...]


@dataclass
class _Submodule:
    name: str
    node: ast.stmt  # its assignment in __init__


def _is_self_attribute(node: ast.AST, instance: str, name: str | None = None) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == instance
        and (name is None or node.attr == name)
    )


def _ends_in_return(block: list[ast.stmt]) -> bool:
    if not block:
        return False
    last = block[-1]
    if isinstance(last, ast.Return):
        return True
    return isinstance(last, ast.If) and _ends_in_return(last.body) and _ends_in_return(last.orelse)


class _MethodReader:
    """Every reading of `self.<name>` in one method, with the conditions on the way to it; calls of the class's other
    methods; and whether the method reaches the submodules some way that cannot be followed."""

    def __init__(self, instance: str, methods: frozenset[str]) -> None:
        self.instance = instance
        self.methods = methods
        self.uses: list[tuple[str, Conditions]] = []
        self.calls: list[tuple[str, Conditions]] = []
        self.supers: list[tuple[str, Conditions]] = []
        self.dynamic = False

    def block(self, statements: Sequence[ast.stmt], conditions: Conditions) -> None:
        for statement in statements:
            self.statement(statement, conditions)
            if isinstance(statement, (ast.Return, ast.Raise)):
                return  # what follows never runs
            if isinstance(statement, ast.If):
                body_returns, else_returns = _ends_in_return(statement.body), _ends_in_return(statement.orelse)
                if body_returns and else_returns:
                    return
                if body_returns or else_returns:
                    conditions = (*conditions, _Condition(statement.test, else_returns))
                    continue
            if any(isinstance(n, ast.Return) for n in walk_same_scope([statement])):
                conditions = (*conditions, _Condition(None, True))  # a return somewhere inside may end the call here

    def statement(self, node: ast.stmt, conditions: Conditions) -> None:
        if isinstance(node, ast.If):
            self.expression(node.test, conditions)
            self.block(node.body, (*conditions, _Condition(node.test, True)))
            self.block(node.orelse, (*conditions, _Condition(node.test, False)))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            for part in (node.iter, node.target) if not isinstance(node, ast.While) else (node.test,):
                self.expression(part, conditions)
            self.block(node.body, conditions)
            self.block(node.orelse, conditions)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.block(node.body, conditions)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                self.block(handler.body, (*conditions, _Condition(None, True)))
            self.block(node.orelse, conditions)  # type: ignore[attr-defined]
            self.block(node.finalbody, conditions)  # type: ignore[attr-defined]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expression(item.context_expr, conditions)
            self.block(node.body, conditions)
        elif isinstance(node, ast.Match):
            self.expression(node.subject, conditions)
            for case in node.cases:
                self.block(case.body, (*conditions, _Condition(None, True)))
        elif isinstance(node, FUNCTIONS):
            self.block(node.body, conditions)  # a closure (for checkpointing): it runs where it is defined
        elif not isinstance(node, ast.ClassDef):
            for child in ast.iter_child_nodes(node):
                self.expression(child, conditions)

    def expression(self, node: ast.AST, conditions: Conditions) -> None:
        if isinstance(node, ast.IfExp):
            self.expression(node.test, conditions)
            self.expression(node.body, (*conditions, _Condition(node.test, True)))
            self.expression(node.orelse, (*conditions, _Condition(node.test, False)))
            return
        if isinstance(node, ast.BoolOp):
            self.expression(node.values[0], conditions)
            later = (*conditions, _Condition(node.values[0], isinstance(node.op, ast.And)))
            for value in node.values[1:]:
                self.expression(value, later)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = conditions
            for generator in node.generators:
                self.expression(generator.iter, inner)
                inner = (*inner, *(_Condition(test, True) for test in generator.ifs))
            for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
                self.expression(part, inner)
            return
        if isinstance(node, ast.Lambda):
            self.expression(node.body, conditions)
            return
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self.instance:
            self._attribute(node, conditions)
            return
        if isinstance(node, ast.Call):
            self._call(node, conditions)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == self.instance:
            self.dynamic = True  # self[...]
        for child in ast.iter_child_nodes(node):
            self.expression(child, conditions)

    def _attribute(self, node: ast.Attribute, conditions: Conditions) -> None:
        if node.attr in _EVERY_SUBMODULE:
            self.dynamic = True
        elif node.attr in self.methods:
            self.calls.append((node.attr, conditions))
        elif isinstance(node.ctx, ast.Load):
            self.uses.append((node.attr, conditions))

    def _call(self, node: ast.Call, conditions: Conditions) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and func.value.func.id == "super":
            self.supers.append((func.attr, conditions))
        name = func.id if isinstance(func, ast.Name) else None
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == self.instance:
            attribute = node.args[1]
            if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
                self.uses.append((attribute.value, conditions))
            else:
                self.dynamic = True
        elif name not in _HARMLESS_WITH_SELF and any(isinstance(a, ast.Name) and a.id == self.instance for a in arguments):
            self.dynamic = True  # `helper(self, x)`: the helper may use any submodule
        elif name == "vars":
            self.dynamic = True


class _Methods:
    """The methods of a class and of its base classes in the file, resolved as Python does (nearest class first)."""

    def __init__(self, hierarchy: list[ast.ClassDef]) -> None:
        self._defined = [[item for item in cls.body if isinstance(item, FUNCTIONS)] for cls in hierarchy]
        self._owner = {id(f): index for index, functions in enumerate(self._defined) for f in functions}

    def get(self, name: str, start: int = 0) -> Function | None:
        for functions in self._defined[start:]:
            found = next((f for f in functions if f.name == name), None)
            if found is not None:
                return found
        return None

    def above(self, method: Function, name: str) -> Function | None:
        """What `super().<name>` means in `method`."""
        return self.get(name, self._owner[id(method)] + 1)

    def names(self) -> frozenset[str]:
        return frozenset(f.name for functions in self._defined for f in functions)

    def every(self) -> list[Function]:
        return [f for functions in self._defined for f in functions]


def _reachable(methods: _Methods, start: Function, instance: str) -> list[Function]:
    """The method and those it calls through `self.<name>` or `super().<name>`, transitively."""
    found, todo = [start], [start]
    while todo:
        method = todo.pop()
        for node in ast.walk(method):
            target = None
            if _is_self_attribute(node, instance):
                target = methods.get(node.attr)  # type: ignore[attr-defined]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "super":
                target = methods.above(method, node.attr)
            if target is not None and target not in found:
                found.append(target)
                todo.append(target)
    return found


class DdpUnusedParameters(WrappedModuleRule):
    info = RuleInfo(
        code="PFL205",
        name="ddp-unused-parameters",
        summary="A DDP-wrapped module whose forward leaves some parameters without a gradient: the next iteration fails.",
        severity="error",
        hint="use every parameter in forward, freeze it, or pass `find_unused_parameters=True` to DistributedDataParallel",
        verifiable=True,
    )
    wrapper = "DistributedDataParallel"
    # A module class with a forward; the DDP wrap may be in another file.
    triggers = (("def forward",),)
    subscriptions = (ast.ClassDef,)

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.ClassDef)
        ctx, ancestors = self.ctx, self.ctx.ancestors
        if not any(isinstance(item, FUNCTIONS) and item.name == "forward" for item in node.body):
            return  # the cheap look first: the class wrapped defines its forward (its bases' uses are read with it)
        hierarchy = same_file_hierarchy(ctx, node)
        if hierarchy is None or not is_module_class(ctx, node, ancestors):
            return
        methods = _Methods(hierarchy)
        if methods.get("__init__") is None:
            return
        instance = self_name(methods.get("forward"))  # type: ignore[arg-type]
        if instance is None or any(self_name(f) not in (None, instance) for f in methods.every()):
            return
        submodules = self._submodules(methods, instance)
        if not submodules:
            return
        reach = self._forward_uses(methods, instance)
        if reach is None or all(self._problem(s.name, reach, instance, False) is None for s in submodules):
            return  # the class's own reading first: the project is asked only about a class with a problem
        evidence = self._wrap_without_unused_detection(node, ancestors)
        if evidence is None:
            return
        static_graph = wrap_option(evidence, "static_graph") in ("True", "?")
        where, related = wrapped_at(ctx, evidence)
        where = where or f" (wrapped by DistributedDataParallel at line {evidence[1]})"
        for submodule in submodules:
            problem = self._problem(submodule.name, reach, instance, static_graph)
            if problem is not None:
                self.report(
                    submodule.node,
                    f"`{instance}.{submodule.name}` holds parameters that {problem}{where}: their gradients never "
                    "arrive, and DDP fails at the next iteration with \"Expected to have finished reduction in the prior "
                    "iteration before starting a new one\"; use them on every call, freeze them (`requires_grad_(False)`), "
                    "or pass `find_unused_parameters=True` to DistributedDataParallel",
                    related=related,
                )

    def _wrap_without_unused_detection(self, cls: ast.ClassDef, ancestors: Sequence[ast.AST]) -> Evidence | None:
        """A DDP wrap of the class itself that does not look for unused parameters, and whose wrapper takes part in
        a backward (a teacher frozen as a whole or run without grad never makes DDP wait for a gradient)."""
        for evidence in wrapper_reach(self.ctx, "DistributedDataParallel", cls, ancestors):
            if not evidence or evidence[4] != WRAPPED_ITSELF or wrap_option(evidence, "backward") == "False":
                continue
            if wrap_option(evidence, "find_unused_parameters") in ("", "False"):
                return evidence
        return None

    def _submodules(self, methods: _Methods, instance: str) -> list[_Submodule]:
        """The attributes that __init__ (and the methods it calls) sets, once and unconditionally, to something that
        holds trainable parameters, and that nothing at construction time hands on elsewhere (weight tying,
        containers)."""
        construction = _reachable(methods, methods.get("__init__"), instance)  # type: ignore[arg-type]
        assigned: dict[str, list[tuple[ast.stmt, bool]]] = {}
        handed_on: set[str] = set()
        for method in methods.every():
            for statement, conditional in _assignments(method):
                for target in _targets(statement):
                    if _is_self_attribute(target, instance):
                        places = assigned.setdefault(target.attr, [])  # type: ignore[attr-defined]
                        places.append((statement, conditional or method not in construction))
            if method in construction:
                handed_on |= _handed_on(method, instance)
        frozen = _frozen_names(self.ctx)
        found = []
        for attribute, places in assigned.items():
            if len(places) != 1 or places[0][1] or attribute in handed_on or attribute in frozen:
                continue
            statement = places[0][0]
            value = statement.value  # type: ignore[attr-defined]
            if value is not None and self._holds_parameters(value):
                found.append(_Submodule(attribute, statement))
        return found

    def _holds_parameters(self, value: ast.expr) -> bool:
        """`nn.Linear(...)`, `nn.Parameter(t)`, `nn.Sequential(nn.Conv2d(...), ...)`, a project class that builds
        parameters; never a value chosen at run time (`a if c else None`)."""
        if not isinstance(value, ast.Call) or any(isinstance(n, (ast.IfExp, ast.BoolOp)) for n in ast.walk(value)):
            return False
        for call in (n for n in ast.walk(value) if isinstance(n, ast.Call)):
            qualified = self.ctx.qualified_name(call.func, [])
            built = creates_parameters(qualified, call)
            if built is None and qualified is not None:
                built = self.ctx.project.holds_parameters(qualified)
            if built:
                return True
        return False

    @staticmethod
    def _forward_uses(methods: _Methods, instance: str) -> list[tuple[str, Conditions]] | None:
        """Every reading of `self.<name>` on the way of a forward call, with its conditions (those of the call sites
        of the methods in between included); None when the forward reaches submodules in a way that cannot be read
        (`self.modules()`, `helper(self)`, a `super()` method of another file)."""
        forward = methods.get("forward")
        assert forward is not None
        entries: dict[int, list[Conditions]] = {id(forward): [()]}
        todo: list[tuple[Function, Conditions]] = [(forward, ())]
        uses: list[tuple[str, Conditions]] = []
        while todo:
            method, entry = todo.pop(0)
            reader = _MethodReader(instance, methods.names())
            reader.block(method.body, entry)
            if reader.dynamic:
                return None
            uses.extend(reader.uses)
            called = [(methods.get(name), conditions) for name, conditions in reader.calls]
            called += [(methods.above(method, name), conditions) for name, conditions in reader.supers]
            for function, conditions in called:
                if function is None:
                    return None  # a method this file does not define
                known = entries.setdefault(id(function), [])
                if conditions not in known and len(known) < _MAX_ENTRIES:
                    known.append(conditions)
                    todo.append((function, conditions))
        return uses

    @staticmethod
    def _problem(attribute: str, uses: list[tuple[str, Conditions]], instance: str, static_graph: bool) -> str | None:
        """What is wrong with the attribute's uses, in words; None when every training forward uses it."""
        counted: list[list[_Condition]] = []
        eval_only: _Condition | None = None
        for name, conditions in uses:
            if name != attribute:
                continue
            left: list[_Condition] = []
            for condition in conditions:
                kind = _condition_kind(condition, attribute, instance)
                if kind == "never":
                    eval_only = eval_only or condition
                    break
                if kind != "always":
                    left.append(condition)
            else:
                if not left:
                    return None  # used on every training forward
                counted.append(left)
        if counted and any(not left for left in _joined(counted)):
            return None  # used in both branches of one test (`if train: ... else: ...`): on every training forward
        if not counted:
            if static_graph:
                return None  # the same parameters go unused on every iteration: a static graph handles that
            if eval_only is not None and eval_only.test is not None:
                return f"`forward` uses only outside training (`{snippet(eval_only.test)}`, line {eval_only.test.lineno})"
            return "`forward` never uses"
        dynamic = any(_condition_kind(c, attribute, instance) == "dynamic" for c in counted[0])
        if static_graph and not dynamic:
            return None
        condition = counted[0][0]
        if condition.test is None:
            return "`forward` uses only on some calls (past an early return, in an exception handler or a match case)"
        polarity = "" if condition.positive else "not "
        return f"`forward` uses only when `{polarity}{snippet(condition.test)}` (line {condition.test.lineno})"


_MAX_JOINED = 64  # condition lists kept while joining the uses of one attribute


def _joined(uses: list[list[_Condition]]) -> list[tuple[_Condition, ...]]:
    """The uses' condition lists with every pair that differs only in the side of one test joined into one without
    that test: a use under `if train:` and one in its `else` (or past its early return) make a use without it."""
    found = {tuple(use) for use in uses}
    changed = True
    while changed and len(found) < _MAX_JOINED:
        changed = False
        for first in list(found):
            for second in list(found):
                if len(first) != len(second):
                    continue
                differing = [i for i, (a, b) in enumerate(zip(first, second)) if a != b]
                if len(differing) != 1:
                    continue
                a, b = first[differing[0]], second[differing[0]]
                if a.test is not None and a.test is b.test and a.positive != b.positive:
                    joined = first[: differing[0]] + first[differing[0] + 1 :]
                    if joined not in found:
                        found.add(joined)
                        changed = True
    return list(found)


def _condition_kind(condition: _Condition, attribute: str, instance: str) -> str:
    """"always" when every training forward passes it (`self.training`, a test of the attribute itself), "never"
    when none does (`not self.training`), "static" when it reads only the module's own settings, else "dynamic"."""
    test = condition.test
    if test is None:
        return "dynamic"
    positive = condition.positive
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, positive = test.operand, not positive
    if _is_self_attribute(test, instance, "training"):
        return "always" if positive else "never"
    for node in ast.walk(test):
        if _is_self_attribute(node, instance, attribute):
            return "always"  # `if self.proj is not None:` is true once the attribute holds a module
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr":
            return "always"
    names = [n for n in ast.walk(test) if isinstance(n, ast.Name)]
    if all(n.id == instance for n in names) and not any(isinstance(n, ast.Call) for n in ast.walk(test)):
        return "static"
    return "dynamic"


def _targets(statement: ast.stmt) -> list[ast.expr]:
    if isinstance(statement, ast.Assign):
        return statement.targets
    return [statement.target] if isinstance(statement, ast.AnnAssign) else []  # type: ignore[list-item]


def _assignments(method: Function) -> Iterator[tuple[ast.stmt, bool]]:
    """Assignments in the method, each with whether it runs only on some calls (under a branch, in a loop)."""

    def walk(statements: list[ast.stmt], conditional: bool) -> Iterator[tuple[ast.stmt, bool]]:
        for statement in statements:
            if isinstance(statement, (ast.Assign, ast.AnnAssign)):
                yield statement, conditional
            elif isinstance(statement, (ast.With, ast.AsyncWith)):
                yield from walk(statement.body, conditional)
            elif isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)):
                for field in ("body", "orelse", "finalbody"):
                    yield from walk(getattr(statement, field, []), True)
                for inner in getattr(statement, "handlers", []) + getattr(statement, "cases", []):
                    yield from walk(inner.body, True)

    yield from walk(method.body, False)


def _handed_on(method: Function, instance: str) -> set[str]:
    """Attributes read at construction time in a way that puts them to use elsewhere: inside another container
    (`nn.Sequential(self.a, self.b)`), as a value assigned (`self.head.weight = self.embed.weight`), or passed to a
    function that is not an in-place initialiser (`nn.init.normal_`, `trunc_normal_`)."""
    found: set[str] = set()
    for statement in walk_same_scope(method.body):
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
            found |= {n.attr for n in ast.walk(statement.value) if _is_self_attribute(n, instance)}  # type: ignore[attr-defined]
        if isinstance(statement, ast.Call):
            func = statement.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name.endswith("_"):
                continue  # an in-place initialiser
            for argument in [*statement.args, *(k.value for k in statement.keywords)]:
                if _is_self_attribute(argument, instance):
                    found.add(argument.attr)  # type: ignore[attr-defined]
                elif isinstance(argument, (ast.List, ast.Tuple, ast.Set, ast.Starred)):
                    found |= {n.attr for n in ast.walk(argument) if _is_self_attribute(n, instance)}  # type: ignore[attr-defined]
    return found


def _frozen_names(ctx: FileContext) -> frozenset[str]:
    """Attribute names that the file freezes somewhere: `x.requires_grad_(False)`, `p.requires_grad = False` in a loop
    over `x.parameters()`, `x.weight.requires_grad = False`, or a call of a function named like `freeze(x)`."""
    key = ("frozen-attribute-names",)
    if key in ctx.memo:
        return ctx.memo[key]  # type: ignore[return-value]
    names: set[str] = set()
    data = ctx.text.data
    if data.isascii() and b"requires_grad" not in data and b"freeze" not in data.lower():
        ctx.memo[key] = frozenset(names)  # nothing to read: every way of freezing spells one of these words
        return ctx.memo[key]  # type: ignore[return-value]

    def attributes(node: ast.AST) -> set[str]:
        return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}

    for node in nodes_of(ctx.tree, (ast.Call, ast.For, ast.AsyncFor, ast.Assign)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            value = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "requires_grad"), None)
            if isinstance(value, ast.Constant) and value.value is False or value is not None and not isinstance(value, ast.Constant):
                names |= attributes(node.func.value)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in inner.targets):
                    names |= attributes(node.iter)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets):
            names |= {a for t in node.targets for a in attributes(t)}
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if "freeze" in name.lower():
                names |= {a for argument in node.args for a in attributes(argument)}
                if isinstance(func, ast.Attribute):
                    names |= attributes(func.value)
    names.discard("requires_grad")
    ctx.memo[key] = frozenset(names)
    return ctx.memo[key]  # type: ignore[return-value]
