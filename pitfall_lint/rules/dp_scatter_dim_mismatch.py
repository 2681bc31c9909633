"""PFL103: DataParallel splits every input along one dim; time-major input or list lengths then mismatch the batch."""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from pitfall_lint.analysis.modules import data_parallel_reach, is_module_class, same_module, wrapped_at
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.scopes import (
    FUNCTIONS,
    Function,
    enclosing_function,
    local_value,
    module_function,
    self_name,
)
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import Related, RuleInfo
from pitfall_lint.rules.base import Rule

_DATA_PARALLEL = "torch.nn.DataParallel"
_DATA_PARALLEL_FUNCTIONS = frozenset(
    {"torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"}
)
_PACK = "torch.nn.utils.rnn.pack_padded_sequence"
_PACK_LENGTHS_POSITION = 1  # pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True)
_PACK_BATCH_FIRST_POSITION = 2
_DIM_POSITION = {_DATA_PARALLEL: 3}  # DataParallel(module, device_ids, output_device, dim)
_FUNCTION_DIM_POSITION = 4  # data_parallel(module, inputs, device_ids, output_device, dim, module_kwargs)
# Operations that reorder axes: a module that applies one may turn batch-first input into time-major itself.
_AXIS_SWAPS = frozenset(
    {"transpose", "transpose_", "permute", "t", "t_", "swapaxes", "swapdims", "movedim", "moveaxis", "T", "mT"}
)
_LENGTH_WORD = re.compile(r"len", re.IGNORECASE)
_LIST_BUILDERS = frozenset({"list", "sorted"})
_MAX_DEPTH = 4


@dataclass(frozen=True)
class _Wrap:
    """One `nn.DataParallel(...)` (or `data_parallel(...)`) call and what it wraps."""

    call: ast.Call
    ancestors: tuple[ast.AST, ...]
    cls: ast.ClassDef | None
    splits_dim_zero: bool  # `dim` absent or literal 0


def _swaps_axes(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Attribute) and n.attr in _AXIS_SWAPS)
        or (isinstance(n, ast.Name) and n.id in ("transpose", "permute", "swapaxes", "movedim"))
        for n in ast.walk(node)
    )


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _argument(call: ast.Call, position: int, name: str) -> ast.expr | None:
    value = _keyword(call, name)
    if (
        value is None
        and len(call.args) > position
        and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1])
    ):
        value = call.args[position]
    return value


def _is_false(node: ast.expr | None) -> bool:
    return node is None or (
        isinstance(node, ast.Constant) and node.value in (False, 0) and not isinstance(node.value, str)
    )


def _targets_by_spelling(assign: ast.Assign) -> Iterator[tuple[str, int | None]]:
    """(spelling, position) for what the assignment binds: None for a whole target, i for element i of a tuple."""
    for t in assign.targets:
        yield ast.unparse(t), None
        if isinstance(t, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in t.elts):
            yield from ((ast.unparse(e), i) for i, e in enumerate(t.elts))


def _assignments_by_spelling(assignments: Iterable[ast.Assign]) -> dict[str, list[tuple[ast.Assign, int | None]]]:
    """Each assignment under the spellings it binds, with the tuple position (the last, when several)."""
    found: dict[str, list[tuple[ast.Assign, int | None]]] = {}
    for assign in assignments:
        positions: dict[str, list[int | None]] = {}
        for spelling, position in _targets_by_spelling(assign):
            positions.setdefault(spelling, []).append(position)
        for spelling, where in positions.items():
            found.setdefault(spelling, []).extend((assign, position) for position in where)
    return found


def _own_returns(function: Function) -> list[ast.Return]:
    """The function's return statements, not those of functions or classes nested in it."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _enclosing_class(ancestors: Sequence[ast.AST]) -> ast.ClassDef | None:
    return next((a for a in reversed(ancestors) if isinstance(a, ast.ClassDef)), None)


def _owner(spelled: ast.expr, ancestors: Sequence[ast.AST]) -> ast.AST | None:
    """Whose `model` or `self.model` a spelling is: the function a name is local to, the class of an attribute."""
    return enclosing_function(ancestors) if isinstance(spelled, ast.Name) else _enclosing_class(ancestors)


def _through_same_module_calls(call: ast.Call, ancestors: tuple[ast.AST, ...]) -> tuple[ast.Call, tuple[ast.AST, ...]]:
    """The outermost call of `nn.DataParallel(m).cuda().train()` that still gives the wrap, with its ancestors."""
    top = call
    while len(ancestors) > 1 and isinstance(ancestors[-2], ast.Call) and ancestors[-2].func is ancestors[-1]:
        if same_module(ancestors[-2]) is not call:
            break
        top, ancestors = ancestors[-2], ancestors[:-2]
    return top, ancestors


def _parameters(function: Function) -> list[str]:
    arguments = function.args
    return [a.arg for a in [*arguments.posonlyargs, *arguments.args]]


class DpScatterDimMismatch(Rule):
    info = RuleInfo(
        code="PFL103",
        name="dp-scatter-dim-mismatch",
        summary="A module under nn.DataParallel packs time-major input or gets lengths as a list: the split misses the batch.",
        severity="warning",
        hint='feed batch-first tensors (DataParallel scatters dim 0) and pass lengths as a tensor of the batch, not a list',
        verifiable=True,
    )
    # The packing call; the wrap (`DataParallel`, `data_parallel`) may be in this file or elsewhere in the project.
    triggers = (("pack_padded_sequence",),)
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._wrap_calls: list[tuple[ast.Call, tuple[ast.AST, ...], str]] = []
        self._packs: list[tuple[ast.Call, tuple[ast.AST, ...]]] = []
        self._reported: set[int] = set()
        self._classes: dict[str, ast.ClassDef] = {}

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        name = self.ctx.qualified_name(node.func)
        if name == _DATA_PARALLEL or name in _DATA_PARALLEL_FUNCTIONS:
            self._wrap_calls.append((node, tuple(self.ctx.ancestors), name))
        elif name == _PACK:
            self._packs.append((node, tuple(self.ctx.ancestors)))

    # -- the whole file: which classes run under DataParallel

    def finish(self) -> None:
        if not self._wrap_calls and not self._packs:
            return
        self._classes = {
            s.name: s for s in self.ctx.tree.body if isinstance(s, ast.ClassDef) and is_module_class(self.ctx, s)
        }
        wraps = [self._wrap(call, ancestors, name) for call, ancestors, name in self._wrap_calls]
        wrapped_here = set()
        for wrap in wraps:
            if wrap.cls is not None and wrap.splits_dim_zero:
                wrapped_here.add(wrap.cls.name)
                self._check_time_major_packs(wrap.cls, f" (line {wrap.call.lineno})", ())
        self._check_classes_wrapped_elsewhere(wrapped_here)
        for wrap in wraps:
            self._check_list_arguments(wrap)

    def _check_classes_wrapped_elsewhere(self, wrapped_here: set[str]) -> None:
        """Modules of this file that another file of the project wraps, splitting inputs along dim 0."""
        packing = {cls.name for _, ancestors in self._packs if (cls := _enclosing_class(ancestors)) is not None}
        for name in sorted(packing & self._classes.keys() - wrapped_here):
            cls = self._classes[name]
            evidence = data_parallel_reach(self.ctx, cls, [])
            if evidence and evidence[3]:  # a real wrap site, with dim 0
                where, related = wrapped_at(self.ctx, evidence)
                if where:
                    self._check_time_major_packs(cls, where, related)

    def _wrap(self, call: ast.Call, ancestors: tuple[ast.AST, ...], name: str) -> _Wrap:
        module = _argument(call, 0, "module")
        cls = self._class_of(module, ancestors, call.lineno) if module is not None else None
        position = _DIM_POSITION.get(name, _FUNCTION_DIM_POSITION)
        dim = _argument(call, position, "dim")
        may_pass_dim = any(k.arg is None for k in call.keywords)  # **options
        return _Wrap(call, ancestors, cls, _is_false(dim) and (dim is not None or not may_pass_dim))

    def _class_of(
        self, expr: ast.AST, ancestors: Sequence[ast.AST], line: int, depth: int = 0, index: int | None = None
    ) -> ast.ClassDef | None:
        """The same-file Module class that `expr` builds: `Model(...)`, `Model(...).to(device)`, a variable set to
        one, or a same-file function returning one (`model, inputs = make_example()`: `index` picks the element)."""
        if depth > _MAX_DEPTH:
            return None
        if index is None:
            expr = same_module(expr)
        if isinstance(expr, ast.Tuple) and index is not None:
            element = expr.elts[index] if index < len(expr.elts) else None
            return self._class_of(element, ancestors, line, depth + 1) if element is not None else None
        if isinstance(expr, ast.Call):
            name = self.ctx.qualified_name(expr.func, ancestors) or ""
            if index is None and name in self._classes:
                return self._classes[name]
            return self._returned_class(name, index, depth)
        if index is not None or not isinstance(expr, (ast.Name, ast.Attribute)):
            return None
        if isinstance(expr, ast.Name):
            function = enclosing_function(ancestors)
            local = self._last_assignment(expr.id, function, line) if function is not None else None
            if local is not None:
                assign, position = local
                return self._class_of(assign.value, ancestors, assign.lineno, depth + 1, position)
        return self._class_of_target(ast.unparse(expr), depth)

    def _class_of_target(self, target: str, depth: int) -> ast.ClassDef | None:
        """Not set in this function (a parameter, an attribute, a module variable): every assignment of that exact
        target in the file, when they agree on one class."""
        key = ("pfl103-class-of-target", target, depth)
        if key not in self.ctx.memo:
            found = set()
            for assign, position in self._assignments().get(target, []):
                cls = self._class_of(assign.value, ancestors_of(self.ctx, assign), assign.lineno, depth + 1, position)
                if cls is not None:
                    found.add(cls.name)
            self.ctx.memo[key] = self._classes[found.pop()] if len(found) == 1 else None
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _last_assignment(self, name: str, function: Function, before_line: int) -> tuple[ast.Assign, int | None] | None:
        """The last assignment binding `name` in the function (nested functions included) before the line, with
        the tuple position it binds."""
        key = ("pfl103-function-assignments", id(function))
        if key not in self.ctx.memo:
            every = _assignments_by_spelling(n for n in ast.walk(function) if isinstance(n, ast.Assign))
            latest = {spelling: list(dict((id(a), (a, p)) for a, p in entries).values()) for spelling, entries in every.items()}
            self.ctx.memo[key] = {spelling: sorted(entries, key=lambda e: e[0].lineno) for spelling, entries in latest.items()}
        entries = self.ctx.memo[key].get(name, [])  # type: ignore[attr-defined]
        at = bisect.bisect_left(entries, before_line, key=lambda entry: entry[0].lineno)
        return entries[at - 1] if at else None

    def _returned_class(self, function_name: str, index: int | None, depth: int) -> ast.ClassDef | None:
        """The class a same-file top-level function returns (element `index` of the tuple it returns)."""
        key = ("pfl103-returned-class", function_name, index, depth)
        if key in self.ctx.memo:
            return self.ctx.memo[key]  # type: ignore[return-value]
        function = module_function(self.ctx.tree, function_name)
        found = set()
        for node in _own_returns(function) if function is not None else []:
            if node.value is not None:
                cls = self._class_of(node.value, [function], node.lineno, depth + 1, index)
                found.add(cls.name if cls is not None else None)
        result = self._classes[found.pop()] if len(found) == 1 and None not in found else None
        self.ctx.memo[key] = result
        return result

    def _assignments(self) -> dict[str, list[tuple[ast.Assign, int | None]]]:
        key = ("pfl103-assignments",)
        if key not in self.ctx.memo:
            self.ctx.memo[key] = _assignments_by_spelling(n for n in ast.walk(self.ctx.tree) if isinstance(n, ast.Assign))
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _method_table(self, cls: ast.ClassDef, depth: int = 0) -> dict[str, Function]:
        """Methods by name, the class's own overriding those of its same-file bases."""
        methods: dict[str, Function] = {}
        if depth <= _MAX_DEPTH:
            for base in reversed(cls.bases):
                if isinstance(base, ast.Name) and base.id in self._classes and self._classes[base.id] is not cls:
                    methods.update(self._method_table(self._classes[base.id], depth + 1))
        methods.update({n.name: n for n in cls.body if isinstance(n, FUNCTIONS)})
        return methods

    def _run_in_replicas(self, root: ast.ClassDef) -> dict[int, tuple[Function, tuple[ast.ClassDef, ...]]]:
        """The methods that run in the replicas, by node id, with the classes that lead to each from the wrapped one
        (outermost first): `forward` and the methods it calls through `self`, of the wrapped class and, the same
        way, of the same-file submodules stored on it (`self.encoder = Encoder(...)`). A method called only from
        outside (`model.module.generate(...)`) does not run under DataParallel."""
        key = ("pfl103-run-in-replicas", id(root))
        if key not in self.ctx.memo:
            self.ctx.memo[key] = self._replicated_methods(root)
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _replicated_methods(self, root: ast.ClassDef) -> dict[int, tuple[Function, tuple[ast.ClassDef, ...]]]:
        found: dict[int, tuple[Function, tuple[ast.ClassDef, ...]]] = {}
        queue: list[tuple[ast.ClassDef, tuple[ast.ClassDef, ...]]] = [(root, ())]
        seen: set[str] = set()
        while queue:
            cls, path = queue.pop(0)
            if cls.name in seen:
                continue
            seen.add(cls.name)
            methods = self._method_table(cls)
            todo, done = ["forward"], set()
            while todo:
                name = todo.pop()
                if name in done or name not in methods:
                    continue
                done.add(name)
                method = methods[name]
                found.setdefault(id(method), (method, path))
                instance = self_name(method)
                todo += [
                    n.func.attr
                    for n in ast.walk(method)
                    if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and isinstance(n.func.value, ast.Name)
                    and n.func.value.id == instance
                ]
            for method in methods.values():
                queue += [(sub, (*path, cls)) for sub in self._submodule_classes(method, cls)]
        return found

    def _submodule_classes(self, method: Function, cls: ast.ClassDef) -> list[ast.ClassDef]:
        """Same-file classes the method stores on the instance: `self.encoder = Encoder(...)`."""
        instance = self_name(method)
        found = []
        for node in ast.walk(method):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == instance
                for t in node.targets
            ):
                value = same_module(node.value)
                if isinstance(value, ast.Call):
                    sub = self._classes.get(self.ctx.qualified_name(value.func, [cls, method]) or "")
                    if sub is not None and sub is not cls:
                        found.append(sub)
        return found

    # -- (a) time-major packing in a class that runs under DataParallel with dim=0

    def _check_time_major_packs(self, wrapped: ast.ClassDef, where: str, related: tuple[Related, ...]) -> None:
        replicated = self._run_in_replicas(wrapped)
        swapping = sum(self._swaps_axes(m) for m, _ in replicated.values())
        for method, path in replicated.values():
            for call, ancestors in self._packs_in(method, outermost=True):
                cls = _enclosing_class(ancestors)
                if cls is None:
                    continue
                batch_first = _argument(call, _PACK_BATCH_FIRST_POSITION, "batch_first")
                if not _is_false(batch_first) or any(k.arg is None for k in call.keywords):
                    continue
                others_swap = swapping - self._swaps_axes(method) > 0
                if self._may_be_transposed(call, ancestors, method, path, others_swap):
                    continue
                via = f" (as a submodule of `{path[0].name}`)" if path else ""
                self._report(
                    call,
                    f"`pack_padded_sequence` reads time-major input (`batch_first=False`) in `{cls.name}`, which runs "
                    f"under nn.DataParallel{via}{where}: DataParallel splits inputs along dim 0, here "
                    "time, so the lengths no longer match the batch; feed batch-first input with `batch_first=True`",
                    related,
                )

    def _packs_in(self, function: Function, outermost: bool = False) -> list[tuple[ast.Call, tuple[ast.AST, ...]]]:
        """The packing calls inside the function (with `outermost`, only those it is the outermost function of)."""
        key = ("pfl103-packs-by-function",)
        if key not in self.ctx.memo:
            inside: dict[int, list[tuple[ast.Call, tuple[ast.AST, ...]]]] = {}
            outer: dict[int, list[tuple[ast.Call, tuple[ast.AST, ...]]]] = {}
            for call, ancestors in self._packs:
                functions = [a for a in ancestors if isinstance(a, FUNCTIONS)]
                for enclosing in dict.fromkeys(functions):
                    inside.setdefault(id(enclosing), []).append((call, ancestors))
                if functions:
                    outer.setdefault(id(functions[0]), []).append((call, ancestors))
            self.ctx.memo[key] = (inside, outer)
        inside, outer = self.ctx.memo[key]  # type: ignore[misc]
        return (outer if outermost else inside).get(id(function), [])

    def _swaps_axes(self, node: ast.AST) -> bool:
        key = ("pfl103-swaps-axes", id(node))
        if key not in self.ctx.memo:
            self.ctx.memo[key] = _swaps_axes(node)
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _may_be_transposed(
        self,
        call: ast.Call,
        ancestors: Sequence[ast.AST],
        method: Function,
        path: tuple[ast.ClassDef, ...],
        other_methods_swap: bool,
    ) -> bool:
        """Whether the module could have turned batch-first input into the time-major tensor it packs."""
        if any(self._swaps_axes(outer) for outer in path):  # a wrapping module reorders axes before calling this one
            return True
        # A helper method: whichever replicated method calls it may pass a transposed tensor.
        if method.name != "forward" and other_methods_swap:
            return True
        function = enclosing_function(ancestors)
        packed = _argument(call, 0, "input")
        return packed is not None and self._derives_from_swap(packed, function, call.lineno, 0)

    def _derives_from_swap(self, expr: ast.AST, function: Function | None, line: int, depth: int) -> bool:
        if self._swaps_axes(expr):
            return True
        if depth >= _MAX_DEPTH:
            return False
        for name in {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}:
            value = local_value(name, function, line)
            if value is not None and self._derives_from_swap(
                value, function, getattr(value, "lineno", line), depth + 1
            ):
                return True
        return False

    # -- (b) lengths handed to the wrapped module as a Python list

    def _check_list_arguments(self, wrap: _Wrap) -> None:
        forward = self._forward(wrap.cls) if wrap.cls is not None else None
        for site, site_ancestors, arguments in self._call_sites(wrap):
            function = enclosing_function(site_ancestors)
            for index, argument in enumerate(arguments):
                if isinstance(argument, ast.Starred):
                    break
                parameter = self._positional_parameter(forward, index)
                self._check_argument(argument, parameter, forward, wrap, function, site.lineno)
            for keyword in site.keywords:
                if keyword.arg is not None:
                    self._check_argument(keyword.value, keyword.arg, forward, wrap, function, site.lineno)

    def _check_argument(
        self,
        argument: ast.expr,
        parameter: str | None,
        forward: Function | None,
        wrap: _Wrap,
        function: Function | None,
        line: int,
    ) -> None:
        if parameter is None or not self._is_python_list(argument, function, line):
            return
        if not (
            _LENGTH_WORD.search(parameter) or (forward is not None and self._packs_with_lengths(forward, parameter))
        ):
            return
        target = f"`{wrap.cls.name}`" if wrap.cls is not None else "module"
        self._report(
            argument,
            f"`{parameter}` reaches the nn.DataParallel-wrapped {target} (line {wrap.call.lineno}) as a Python list: "
            "DataParallel copies lists whole to every replica instead of splitting them with the batch; pass a "
            "tensor so each replica gets its own chunk's lengths",
        )

    def _forward(self, cls: ast.ClassDef, depth: int = 0) -> Function | None:
        own = next((n for n in cls.body if isinstance(n, FUNCTIONS) and n.name == "forward"), None)
        if own is not None or depth > _MAX_DEPTH:
            return own
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self._classes:
                found = self._forward(self._classes[base.id], depth + 1)
                if found is not None:
                    return found
        return None

    @staticmethod
    def _positional_parameter(forward: Function | None, index: int) -> str | None:
        if forward is None:
            return None
        names = _parameters(forward)[1:]  # after self
        return names[index] if index < len(names) else None

    def _packs_with_lengths(self, forward: Function, parameter: str) -> bool:
        """Whether forward packs with this parameter as the lengths, directly or through local variables."""
        for call, _ in self._packs_in(forward):
            lengths = _argument(call, _PACK_LENGTHS_POSITION, "lengths")
            if lengths is not None and self._mentions_through_locals(lengths, parameter, forward, call.lineno, 0):
                return True
        return False

    def _mentions_through_locals(self, expr: ast.AST, name: str, function: Function, line: int, depth: int) -> bool:
        names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
        if name in names:
            return True
        if depth >= _MAX_DEPTH:
            return False
        for other in names:
            value = local_value(other, function, line)
            if value is not None and self._mentions_through_locals(
                value, name, function, getattr(value, "lineno", line), depth + 1
            ):
                return True
        return False

    def _is_python_list(self, node: ast.AST, function: Function | None, line: int, depth: int = 0) -> bool:
        """`[10, 9, 8]`, `lengths.tolist()`, `list(...)`, `[len(s) for s in batch]`, or a variable set to one."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return bool(node.elts) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool)
                for e in node.elts
            )
        if isinstance(node, ast.ListComp):
            element = node.elt
            return isinstance(element, ast.Constant) or (
                isinstance(element, ast.Call) and isinstance(element.func, ast.Name) and element.func.id == "len"
            )
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "tolist":
                return True
            return isinstance(node.func, ast.Name) and self.ctx.qualified_name(node.func, []) in _LIST_BUILDERS
        if isinstance(node, ast.Name) and depth == 0:
            value = local_value(node.id, function, line, self.ctx.tree)
            return value is not None and self._is_python_list(value, function, line, depth + 1)
        return False

    def _call_sites(self, wrap: _Wrap) -> list[tuple[ast.Call, tuple[ast.AST, ...], list[ast.expr]]]:
        """Calls of the wrapped model: `nn.DataParallel(m)(...)`, or of the variable or attribute it was stored in."""
        call, ancestors = wrap.call, wrap.ancestors
        if self.ctx.qualified_name(call.func, ancestors) in _DATA_PARALLEL_FUNCTIONS:
            inputs = _argument(call, 1, "inputs")
            return [(call, ancestors, list(inputs.elts))] if isinstance(inputs, ast.Tuple) else []
        top, ancestors = _through_same_module_calls(call, ancestors)
        parent = ancestors[-1] if ancestors else None
        if isinstance(parent, ast.Call) and parent.func is top:
            return [(parent, ancestors[:-1], list(parent.args))]
        if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
            return []
        target = parent.targets[0]
        if not isinstance(target, (ast.Name, ast.Attribute)):
            return []
        spelled = ast.unparse(target)
        owner = _owner(target, ancestors)
        lines, sites = self._calls_by_spelling().get((spelled, id(owner)), ([], []))
        if isinstance(target, ast.Attribute):
            return [(node, site_ancestors, list(node.args)) for node, site_ancestors in sites]
        # A local name: its calls later in the same function, up to the next wrap stored in it.
        wraps = self._wrap_lines().get((spelled, id(owner)), [])
        after = bisect.bisect_right(wraps, call.lineno)
        start = bisect.bisect_right(lines, call.lineno)
        stop = bisect.bisect_left(lines, wraps[after]) if after < len(wraps) else len(lines)
        return [(node, site_ancestors, list(node.args)) for node, site_ancestors in sites[start:stop]]

    def _calls_by_spelling(self) -> dict[tuple[str, int], tuple[list[int], list[tuple[ast.Call, tuple[ast.AST, ...]]]]]:
        """The file's calls of a name or an attribute chain (`model`, `self.model`), by spelling and owner (the
        function a name is local to, the class whose attribute it is), in line order with their lines. One pass, so
        that each wrap reads only its own calls (every wrap reading every `model(...)` of a long file was quadratic)."""
        key = ("pfl103-calls-by-spelling",)
        if key not in self.ctx.memo:
            found: dict[tuple[str, int], list[tuple[ast.Call, tuple[ast.AST, ...]]]] = {}
            for node in ast.walk(self.ctx.tree):
                if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
                    ancestors = tuple(ancestors_of(self.ctx, node))
                    found.setdefault((ast.unparse(node.func), id(_owner(node.func, ancestors))), []).append((node, ancestors))
            ordered = {k: sorted(v, key=lambda site: (site[0].lineno, site[0].col_offset)) for k, v in found.items()}
            self.ctx.memo[key] = {k: ([site[0].lineno for site in v], v) for k, v in ordered.items()}
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _wrap_lines(self) -> dict[tuple[str, int], list[int]]:
        """The lines where a wrap is stored in a local name (`model = nn.DataParallel(...)`), by name and function."""
        key = ("pfl103-stored-wraps",)
        if key not in self.ctx.memo:
            found: dict[tuple[str, int], list[int]] = {}
            for call, ancestors, _ in self._wrap_calls:
                _, ancestors = _through_same_module_calls(call, ancestors)
                parent = ancestors[-1] if ancestors else None
                if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
                    found.setdefault((parent.targets[0].id, id(enclosing_function(ancestors))), []).append(call.lineno)
            self.ctx.memo[key] = {k: sorted(lines) for k, lines in found.items()}
        return self.ctx.memo[key]  # type: ignore[return-value]

    def _report(self, node: ast.AST, message: str, related: tuple[Related, ...] = ()) -> None:
        if id(node) not in self._reported:
            self._reported.add(id(node))
            self.report(node, message, related=related)
