"""PFL301: where the start method re-imports the main module (spawn, forkserver), each child runs the script's
import-time code again and starts processes while it is still bootstrapping."""

from __future__ import annotations

import ast
import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from pitfall_lint.analysis.processes import (
    DEFAULT,
    EXECUTOR_METHODS,
    EXECUTORS,
    LAUNCHERS,
    PROCESS_CLASSES,
    loader_workers,
    process_call_name,
    requested_start_method,
)
from pitfall_lint.analysis.ranks import ancestors_of
from pitfall_lint.analysis.samplers import DATA_LOADERS, iteration_sites, loader_holders
from pitfall_lint.analysis.scopes import FUNCTIONS, is_main_guard
from pitfall_lint.analysis.top_level import plan_main_guard
from pitfall_lint.analysis.training import call_name
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

if TYPE_CHECKING:
    from pitfall_lint.config import TargetVersion

_RE_IMPORTING = frozenset({"spawn", "forkserver", DEFAULT})  # fork copies the parent; an unknown method is not judged
_FORKSERVER_ON_LINUX = (3, 14)
_GUARD = 'move it under `if __name__ == "__main__":`'


@dataclass(frozen=True)
class _Start:
    """How processes are started, and with which start method (DEFAULT: the platform's)."""

    how: str
    method: str


@dataclass
class _Scope:
    """What one function, or the unguarded module level, does that could start processes.

    Each entry carries the node to report: the module-level statement, or the call in a function.
    """

    starts: list[tuple[ast.AST, _Start]] = field(default_factory=list)
    process_starts: list[ast.AST] = field(default_factory=list)
    process_methods: list[str] = field(default_factory=list)  # of the `Process` objects built in the scope
    executors: dict[str, str] = field(default_factory=dict)  # names bound to a process pool executor -> its method
    executor_calls: list[tuple[ast.AST, str, str]] = field(default_factory=list)  # (marker, executor name, method)
    calls: list[tuple[ast.AST, str]] = field(default_factory=list)


def _under_main_guard(chain: Sequence[ast.AST]) -> bool:
    for parent, child in pairwise(chain):
        if isinstance(parent, ast.If):
            if is_main_guard(parent.test, equal=True) and child in parent.body:
                return True
            if is_main_guard(parent.test, equal=False) and child in parent.orelse:
                return True
    return False


def _function_of(ctx: FileContext, node: ast.AST) -> ast.AST | None:
    return next((a for a in reversed(ancestors_of(ctx, node)) if isinstance(a, (*FUNCTIONS, ast.Lambda))), None)


def _callee(chain: Sequence[ast.AST]) -> str:
    """The name of the function called with the last node of the chain as an argument."""
    call = chain[-2] if isinstance(chain[-2], ast.Call) else chain[-3]
    assert isinstance(call, ast.Call)
    return call_name(call) or ast.unparse(call.func)


def _bound_name(call: ast.Call, ancestors: Sequence[ast.AST]) -> str | None:
    """The name a call's result is kept in: `name = call` or `with call as name:`."""
    parent = ancestors[-1] if ancestors else None
    if isinstance(parent, ast.Assign) and parent.value is call and len(parent.targets) == 1:
        target = parent.targets[0]
    elif isinstance(parent, ast.withitem) and parent.context_expr is call:
        target = parent.optional_vars
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


def _message(start: _Start, target: TargetVersion | None) -> str:
    """What fails, under which start methods, platforms and Python versions."""
    subject = f"`{start.how}` starts processes at import time"
    again = "each child re-imports the module, reaches it again and fails while bootstrapping"
    if start.method != DEFAULT:
        return f"{subject} with the {start.method} start method, on every platform: {again}; {_GUARD}"
    if target is not None and target.version >= _FORKSERVER_ON_LINUX:
        return (f"{subject}: on Python {target}+ (the project's {target.source}) the default start method is spawn "
                f"(macOS, Windows) or forkserver (Linux), and {again}; {_GUARD}")
    return (f"{subject}: where the default start method is spawn (macOS, Windows) or forkserver (Linux from Python "
            f"3.14), {again}; only fork (Linux up to Python 3.13) runs it; {_GUARD}")


class MissingMainGuard(Rule):
    info = RuleInfo(
        code="PFL301",
        name="missing-main-guard",
        summary='Processes started at import time, outside `if __name__ == "__main__":`.',
        severity="error",
        hint='move the statements that start processes under `if __name__ == "__main__":`',
        verifiable=True,
        fix="safe",
    )
    triggers = (("multiprocessing", "ProcessPoolExecutor", "num_workers"),)
    suffixes = (".py",)  # a notebook has no main guard to add: PFL308 covers what fails there
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._functions: dict[str, _Scope] = {}
        self._module = _Scope()
        self._loaders: list[ast.Call] = []

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        ancestors = self.ctx.ancestors
        function = next((a for a in ancestors if isinstance(a, (*FUNCTIONS, ast.Lambda))), None)
        if isinstance(function, ast.Lambda):
            return  # a lambda runs only when something calls it
        if function is not None:
            self._record(node, self._functions.setdefault(function.name, _Scope()), node)
        elif not _under_main_guard([*ancestors, node]):
            statement = next((a for a in reversed(ancestors) if isinstance(a, ast.stmt)), node)
            self._record(node, self._module, statement)

    def _record(self, call: ast.Call, scope: _Scope, marker: ast.AST) -> None:
        func = call.func
        name = process_call_name(self.ctx, call)
        if name in LAUNCHERS:
            self._add(scope, marker, name, requested_start_method(self.ctx, call, name))
        elif name in PROCESS_CLASSES:
            scope.process_methods.append(requested_start_method(self.ctx, call, name))
        elif name in EXECUTORS:
            bound = _bound_name(call, self.ctx.ancestors)
            if bound is not None:
                scope.executors[bound] = requested_start_method(self.ctx, call, name)
        elif name in DATA_LOADERS:
            self._loaders.append(call)  # it starts its workers where it is iterated: known once the file is read
        elif isinstance(func, ast.Attribute) and func.attr == "start" and not call.args:
            scope.process_starts.append(marker)
        elif isinstance(func, ast.Attribute) and func.attr in EXECUTOR_METHODS:
            receiver = func.value
            built = process_call_name(self.ctx, receiver) if isinstance(receiver, ast.Call) else None
            if built in EXECUTORS:
                assert isinstance(receiver, ast.Call)
                self._add(scope, marker, f"{built}(...).{func.attr}", requested_start_method(self.ctx, receiver, built))
            elif isinstance(receiver, ast.Name):
                scope.executor_calls.append((marker, receiver.id, func.attr))
        elif isinstance(func, ast.Name):
            scope.calls.append((marker, func.id))

    @staticmethod
    def _add(scope: _Scope, marker: ast.AST, how: str, method: str) -> None:
        if method in _RE_IMPORTING:
            scope.starts.append((marker, _Start(how, method)))

    def _record_loader_iterations(self) -> None:
        """Where each DataLoader with workers is iterated, which starts its workers: in the unguarded module code,
        or in a function (which then starts processes when called)."""
        for loader in self._loaders:
            workers = loader_workers(self.ctx, loader)
            if workers is None:
                continue
            ancestors = ancestors_of(self.ctx, loader)
            name = process_call_name(self.ctx, loader, ancestors)
            start = _Start(f"iter(DataLoader({workers}))", requested_start_method(self.ctx, loader, name, ancestors))
            if start.method not in _RE_IMPORTING:
                continue
            for path in loader_holders(self.ctx, loader):
                if iteration_sites(self.ctx, path[-1]) is None:
                    continue
                # Where the code that iterates got the loader: handed down as an argument, from the caller.
                index = len(path) - 1
                while index > 0 and self._handed_down(path[index - 1], path[index]):
                    index -= 1
                holder = path[index]
                chain = [*ancestors_of(self.ctx, holder), holder]
                how = start if index == len(path) - 1 else _Start(f"{_callee(chain)}() -> {start.how}", start.method)
                function = next((a for a in chain if isinstance(a, (*FUNCTIONS, ast.Lambda))), None)
                if isinstance(function, FUNCTIONS):
                    self._functions.setdefault(function.name, _Scope()).starts.append((holder, how))
                elif function is None and not _under_main_guard(chain):
                    statement = next(a for a in reversed(chain) if isinstance(a, ast.stmt))
                    self._module.starts.append((statement, how))

    def _handed_down(self, argument: ast.AST, parameter_use: ast.AST) -> bool:
        """Whether a loader went from an argument of a call into the called function's parameter."""
        parent = ancestors_of(self.ctx, argument)[-1]
        return isinstance(parent, (ast.Call, ast.keyword)) and _function_of(self.ctx, argument) is not _function_of(
            self.ctx, parameter_use
        )

    @staticmethod
    def _direct_starts(scope: _Scope) -> list[tuple[ast.AST, _Start]]:
        starts = list(scope.starts)
        method = next((m for m in scope.process_methods if m in _RE_IMPORTING), None)
        if method is not None:
            start = _Start("multiprocessing.Process(...).start()", method)
            starts += [(marker, start) for marker in scope.process_starts]
        for marker, executor, used in scope.executor_calls:
            method = scope.executors.get(executor, "")
            if method in _RE_IMPORTING:
                starts.append((marker, _Start(f"concurrent.futures.ProcessPoolExecutor(...).{used}", method)))
        return sorted(starts, key=lambda entry: (entry[0].lineno, entry[0].col_offset))  # type: ignore[attr-defined]

    def _starting_functions(self) -> dict[str, _Start]:
        """Functions of this file that start processes, each with how it does."""
        starting = {name: starts[0][1] for name, scope in self._functions.items() if (starts := self._direct_starts(scope))}
        changed = True
        while changed:
            changed = False
            for name, scope in self._functions.items():
                callee = next((c for _, c in scope.calls if c in starting), None)
                if name not in starting and callee is not None:
                    starting[name] = _Start(f"{callee}() -> {starting[callee].how}", starting[callee].method)
                    changed = True
        return starting

    def finish(self) -> None:
        self._record_loader_iterations()
        starting = self._starting_functions()
        culprits = self._direct_starts(self._module) + [
            (marker, _Start(f"{callee}() -> {starting[callee].how}", starting[callee].method))
            for marker, callee in self._module.calls
            if callee in starting
        ]
        if not culprits:
            return
        plan = plan_main_guard(self.ctx, self._top_level_indices([marker for marker, _ in culprits]))
        reported: set[int] = set()
        for statement, start in culprits:
            if id(statement) in reported:
                continue
            reported.add(id(statement))
            self.report(statement, _message(start, self.ctx.project.target), fix=plan)

    def _top_level_indices(self, markers: list[ast.AST]) -> set[int]:
        """The top-level statements that hold these nodes."""
        body = self.ctx.tree.body
        starts = [s.lineno for s in body]
        found = set()
        for marker in markers:
            index = bisect.bisect_right(starts, marker.lineno) - 1  # type: ignore[attr-defined]
            if index >= 0:
                found.add(index)
        return found
