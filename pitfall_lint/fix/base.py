"""The fixer contract, and the libcst helpers every fixer shares.

A rule works out, on `ast`, what its rewrite needs (the `FixPlan` of each diagnostic); its fixer finds the
flagged node in a libcst tree by the diagnostic's position and rewrites it, losing no comment or formatting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ClassVar, Generic, TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, ParentNodeProvider, PositionProvider

from pitfall_lint.diagnostic import Diagnostic, FixPlan

N = TypeVar("N", bound=cst.CSTNode)
K = TypeVar("K", bound=cst.CSTNode)
V = TypeVar("V")
Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement  # what a block's body holds


class Located:
    """A parsed module with the position and parent of every node."""

    def __init__(self, module: cst.Module) -> None:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)  # each fix parses afresh, so no copy is needed
        self.module = module
        self.positions: dict[cst.CSTNode, CodeRange] = dict(wrapper.resolve(PositionProvider))
        self.parents: dict[cst.CSTNode, cst.CSTNode] = dict(wrapper.resolve(ParentNodeProvider))

    def at(self, node_type: type[N], diagnostics: Iterable[Diagnostic]) -> dict[N, FixPlan]:
        """The nodes of this type that start where a diagnostic does (1-based columns, as diagnostics count)."""
        wanted = {(d.line, d.column): d.fix for d in diagnostics if d.fix is not None}
        found: dict[N, FixPlan] = {}
        for node, where in self.positions.items():
            plan = wanted.get((where.start.line, where.start.column + 1))
            if plan is not None and isinstance(node, node_type):
                found[node] = plan
        return found

    def starting_on(self, line: int, node_type: type[N]) -> N | None:
        return next((n for n, where in self.positions.items() if isinstance(n, node_type) and where.start.line == line), None)

    def statement_of(self, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
        """The statement line that holds the node, if the node is an expression statement of its own."""
        parent = self.parents.get(node)
        line = self.parents.get(parent) if isinstance(parent, cst.Expr) and parent.value is node else None
        return line if isinstance(line, cst.SimpleStatementLine) else None


class Fixer:
    """Rewrites the findings of one rule; the driver re-checks the result, so a fixer may decline a node."""

    code: ClassVar[str]

    def rewrite(self, located: Located, diagnostics: Sequence[Diagnostic]) -> cst.Module:
        raise NotImplementedError


class _Rewriter(cst.CSTTransformer, Generic[K, V]):
    """Replaces the given original nodes with what `replace` makes of their updated versions."""

    def __init__(self, targets: Mapping[K, V], replace: Callable[[K, V], cst.CSTNode]) -> None:
        super().__init__()
        self._targets = targets
        self._replace = replace

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        if original_node in self._targets:
            # The updated node is of the original's type: a transformer rebuilds, it does not retype.
            return self._replace(updated_node, self._targets[original_node])  # type: ignore[arg-type, index]
        return updated_node


def replace_nodes(module: cst.Module, targets: Mapping[K, V], replace: Callable[[K, V], cst.CSTNode]) -> cst.Module:
    """`replace(updated_node, target_value)` for every target node, in one pass over the tree."""
    return module.visit(_Rewriter(targets, replace))


def add_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """`f(a, b)` -> `f(a, b, name=value)`, keeping a trailing comma where the call had one."""
    argument = cst.Arg(
        value=cst.parse_expression(value),
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if args and isinstance(args[-1].comma, cst.Comma):  # `f(\n    a,\n)`: the new argument takes the trailing comma
        between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        argument = argument.with_changes(comma=args[-1].comma)
        args[-1] = args[-1].with_changes(comma=between)
    return call.with_changes(args=[*args, argument])


def under_if(test: str, statements: Sequence[Statement], leading_lines: Sequence[cst.EmptyLine] | None = None) -> cst.If:
    """`if test:` around the statements; the comments above the first one go above the `if`."""
    first, *rest = statements
    above = first.leading_lines if leading_lines is None else leading_lines
    body = [first.with_changes(leading_lines=()) if leading_lines is None else first, *rest]
    return cst.If(test=cst.parse_expression(test), body=cst.IndentedBlock(body=body), leading_lines=above)


class KeywordFixer(Fixer):
    """Adds `keyword=<the plan's value>` to the flagged call."""

    keyword: ClassVar[str]

    def rewrite(self, located: Located, diagnostics: Sequence[Diagnostic]) -> cst.Module:
        calls = {call: plan[self.keyword] for call, plan in located.at(cst.Call, diagnostics).items()}
        return replace_nodes(located.module, calls, lambda call, value: add_keyword(call, self.keyword, value))
