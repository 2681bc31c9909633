"""PFL207: a collective that only some ranks reach; the ranks that do enter it wait for the others for ever."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from pitfall_lint.analysis.collectives import (
    CANDIDATE_METHODS,
    CANDIDATE_PROPERTIES,
    COLLECTIVE_WORDS,
    TORCH_COLLECTIVES,
    collective_call,
    collective_property,
    may_read_collective_property,
)
from pitfall_lint.analysis.rank_splits import Restriction, rank_restrictions
from pitfall_lint.analysis.ranks import may_name_a_rank
from pitfall_lint.analysis.scopes import enclosing_function
from pitfall_lint.analysis.training import reaches_backward, runs_without_grad
from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import RuleInfo
from pitfall_lint.rules.base import Rule

# Calls on the other ranks' side of a guard that cannot hold their half of a pair (logging, printing).
_HARMLESS = frozenset({"print", "info", "warning", "warn", "debug", "error", "exception", "log", "append", "format", "sleep"})
# Frameworks' entry points that run one process when given `devices=1`.
_LAUNCHERS = frozenset({"Trainer", "Fabric"})


@dataclass
class _Collective:
    call: ast.Call | ast.Attribute
    ancestors: list[ast.AST]
    operation: str
    description: str
    restrictions: tuple[Restriction, ...]


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _calls_something(block: list[ast.stmt]) -> bool:
    """Whether the statements call anything beyond logging and printing."""
    for node in (n for statement in block for n in ast.walk(statement)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name not in _HARMLESS:
                return True
    return False


def _other_side_may_pair(restriction: Restriction) -> bool:
    """What the other ranks run instead: the other branch of the guard, or the block they leave by (`if rank != 0:
    wait(); return`). A call there may make the matching collective, out of sight."""
    node = restriction.node
    if restriction.kind == "guard" and isinstance(node, ast.If):
        return _calls_something(node.orelse)
    if restriction.kind == "else" and isinstance(node, ast.If):
        return _calls_something(node.body)
    if restriction.kind == "exit" and isinstance(node, ast.If):
        return _calls_something(node.body[:-1])
    return False


def _single_process(function: ast.AST | None) -> bool:
    for node in ast.walk(function) if function is not None else ():
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            devices = next((k.value for k in node.keywords if k.arg == "devices"), None)
            if name in _LAUNCHERS and isinstance(devices, ast.Constant) and devices.value in (1, "1"):
                return True
    return False


class RankDivergentCollective(Rule):
    info = RuleInfo(
        code="PFL207",
        name="rank-divergent-collective",
        summary="A collective, or a framework call that runs one, that only some ranks reach: the job hangs.",
        severity="error",
        hint="call it on every rank and keep only the rank-0 work under the guard",
        verifiable=True,
    )
    triggers = (COLLECTIVE_WORDS,)
    subscriptions = (ast.Call, ast.Attribute)

    @classmethod
    def may_apply(cls, data: bytes) -> bool:
        """Only a rank test, an early rank exit or a one-process decorator splits the ranks (see _restrictions),
        and each names a rank: a file of collectives without one is not parsed for this rule (in Lightning, 57 of
        the 90 files that only this rule's words would have had parsed)."""
        return may_name_a_rank(data)

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._found: list[_Collective] = []
        if not may_read_collective_property(ctx.text.data):
            # Every attribute of the file visited for a property it cannot spell: 55k calls in Lightning, for none.
            self.subscriptions = (ast.Call,)

    def visit(self, node: ast.AST) -> None:
        ancestors = self.ctx.ancestors
        if isinstance(node, ast.Attribute):
            found = collective_property(self.ctx, node) if node.attr in CANDIDATE_PROPERTIES else None
        else:
            assert isinstance(node, ast.Call)
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr not in CANDIDATE_METHODS:
                return  # the cheap look first
            found = collective_call(self.ctx, node, ancestors)
        if found is None:
            return
        operation, description = found
        if isinstance(node, ast.Call) and operation in TORCH_COLLECTIVES and any(k.arg == "group" and not _is_none(k.value) for k in node.keywords):
            return  # a subgroup's collective: only its members call it
        if operation == "forward" and isinstance(node, ast.Call) and (runs_without_grad(self.ctx, ancestors) or reaches_backward(self.ctx, node, ancestors) is None):
            return  # a forward that trains nothing runs a collective only for a module with buffers: not told here
        # Only a split this rule can spell out (a guard, its `else`, an early exit, a decorator): the shared guard
        # analysis also counts code that runs in a single-process run only, where every rank agrees.
        restrictions = rank_restrictions(self.ctx, node, ancestors)
        if restrictions:
            self._found.append(_Collective(node, list(ancestors), operation, description, restrictions))

    def finish(self) -> None:
        for collective in self._found:
            if self._matched(collective):
                continue
            self.report(
                collective.call,
                f"{collective.description} runs only {collective.restrictions[-1].where()}: the other ranks never "
                "enter it, so the ranks that do wait for them until the process group times out (30 minutes by "
                "default); call it on every rank and keep only the rank-0 work under the guard",
            )

    def _matched(self, collective: _Collective) -> bool:
        """The other ranks make the same call elsewhere in the function, under a guard of their own: `if rank == 0:
        gather(t, lst) else: gather(t)`, or a barrier for the others before the work and one for rank 0 after it; or
        they call something on their side of the guard that may hold their half (`else: engine.serve_others()`); or
        the function runs one process (`Trainer(devices=1)`)."""
        if _other_side_may_pair(collective.restrictions[-1]) or _single_process(enclosing_function(collective.ancestors)):
            return True
        mine = {r.key for r in collective.restrictions}
        function = enclosing_function(collective.ancestors)
        for other in self._found:
            if (
                other is not collective
                and other.operation == collective.operation
                and other.restrictions
                and enclosing_function(other.ancestors) is function
                and {r.key for r in other.restrictions} != mine
            ):
                return True
        return False

