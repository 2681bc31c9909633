"""PFL301: with the spawn start method each child re-imports the script and starts processes again."""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field

from pitfall_lint.analysis.processes import LAUNCHERS, PROCESS_CLASSES, process_call_name
from pitfall_lint.analysis.scopes import FUNCTIONS, is_main_guard
from pitfall_lint.analysis.top_level import plan_main_guard
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule


@dataclass
class _Scope:
    """What one function, or the unguarded module level, does that could start processes.

    Each entry carries the node to report: the module-level statement, or the call in a function.
    """

    launches: list[tuple[ast.AST, str]] = field(default_factory=list)
    process_starts: list[ast.AST] = field(default_factory=list)
    builds_process: bool = False
    calls: list[tuple[ast.AST, str]] = field(default_factory=list)


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
    triggers = (("multiprocessing",),)
    suffixes = (".py",)  # a notebook has no main guard to add: PFL308 covers what fails there
    subscriptions = (ast.Call,)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._functions: dict[str, _Scope] = {}
        self._module = _Scope()

    def visit(self, node: ast.AST) -> None:
        assert isinstance(node, ast.Call)
        ancestors = self.ctx.ancestors
        function = next((a for a in ancestors if isinstance(a, (*FUNCTIONS, ast.Lambda))), None)
        if isinstance(function, ast.Lambda):
            return  # a lambda runs only when something calls it
        if function is not None:
            self._record(node, self._functions.setdefault(function.name, _Scope()), node)
        elif not self._under_main_guard(node):
            statement = next((a for a in reversed(ancestors) if isinstance(a, ast.stmt)), node)
            self._record(node, self._module, statement)

    def _record(self, call: ast.Call, scope: _Scope, marker: ast.AST) -> None:
        func = call.func
        name = process_call_name(self.ctx, call)
        if name in LAUNCHERS:
            scope.launches.append((marker, name))
        elif name in PROCESS_CLASSES:
            scope.builds_process = True
        elif isinstance(func, ast.Attribute) and func.attr == "start" and not call.args:
            scope.process_starts.append(marker)
        elif isinstance(func, ast.Name):
            scope.calls.append((marker, func.id))

    def _under_main_guard(self, node: ast.AST) -> bool:
        chain = [*self.ctx.ancestors, node]
        for parent, child in zip(chain, chain[1:]):
            if isinstance(parent, ast.If):
                if is_main_guard(parent.test, equal=True) and child in parent.body:
                    return True
                if is_main_guard(parent.test, equal=False) and child in parent.orelse:
                    return True
        return False

    @staticmethod
    def _direct_starts(scope: _Scope) -> list[tuple[ast.AST, str]]:
        starts = list(scope.launches)
        if scope.builds_process:
            starts += [(marker, "multiprocessing.Process(...).start()") for marker in scope.process_starts]
        return starts

    def _starting_functions(self) -> dict[str, str]:
        """Functions of this file that start processes, each with how it does."""
        starting = {name: starts[0][1] for name, scope in self._functions.items() if (starts := self._direct_starts(scope))}
        changed = True
        while changed:
            changed = False
            for name, scope in self._functions.items():
                callee = next((c for _, c in scope.calls if c in starting), None)
                if name not in starting and callee is not None:
                    starting[name] = f"{callee}() -> {starting[callee]}"
                    changed = True
        return starting

    def finish(self) -> None:
        starting = self._starting_functions()
        culprits = self._direct_starts(self._module) + [
            (marker, f"{callee}() -> {starting[callee]}") for marker, callee in self._module.calls if callee in starting
        ]
        if not culprits:
            return
        plan = plan_main_guard(self.ctx, self._top_level_indices([marker for marker, _ in culprits]))
        reported: set[int] = set()
        for statement, how in culprits:
            if id(statement) in reported:
                continue
            reported.add(id(statement))
            self.report(
                statement,
                f"`{how}` starts processes at import time: spawned children re-import the module and fail "
                "while bootstrapping; move it under `if __name__ == \"__main__\":`",
                fix=plan,
            )

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
