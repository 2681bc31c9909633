"""PFL402: `sampler.set_epoch(epoch)` as the first statement of the epoch loop the rule found."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.fix.base import Fixer, Located, replace_nodes


def _prepend(loop: cst.For, statement: str) -> cst.For:
    line = cst.parse_statement(statement)
    assert isinstance(line, cst.SimpleStatementLine)
    if isinstance(loop.body, cst.SimpleStatementSuite):  # `for epoch in epochs: train()`
        return loop.with_changes(body=loop.body.with_changes(body=[*line.body, *loop.body.body]))
    return loop.with_changes(body=loop.body.with_changes(body=[line, *loop.body.body]))


class SetEpoch(Fixer):
    code = "PFL402"

    def rewrite(self, located: Located, diagnostics: Sequence[Diagnostic]) -> cst.Module:
        loops: dict[cst.For, str] = {}
        for diagnostic in diagnostics:
            assert diagnostic.fix is not None
            loop = located.starting_on(int(diagnostic.fix["loop"]), cst.For)
            if loop is not None:
                loops[loop] = diagnostic.fix["statement"]
        return replace_nodes(located.module, loops, _prepend)
