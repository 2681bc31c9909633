"""PFL301: the top-level statements that may have an effect moved, in their order, under `if __name__ == "__main__":`
(the file's existing guard, or a new one at the end); the rule's plan (pitfall_lint/analysis/top_level.py) names them
and has shown that the move keeps what the program does."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.fix.base import Fixer, Located, Statement, under_if


def _indented(statements: list[Statement]) -> list[Statement]:
    """Blank lines that separated statements at module level: none at the top of the block, one at most inside it."""
    indented = []
    for index, statement in enumerate(statements):
        lines: list[cst.EmptyLine] = []
        for line in statement.leading_lines:
            if line.comment is None and ((index == 0 and not lines) or (lines and lines[-1].comment is None)):
                continue
            blank = cst.EmptyLine(indent=False, newline=line.newline)
            lines.append(line if line.comment is not None else blank)
        indented.append(statement.with_changes(leading_lines=lines))
    return indented


def _keep_spacing(body: list[Statement], moved: list[Statement]) -> list[Statement]:
    """The statements that stay; one that followed moved ones gets their blank lines if it had none."""
    kept: list[Statement] = []
    blanks: list[cst.EmptyLine] = []
    for statement in body:
        if statement in moved:
            blanks = blanks or [line for line in statement.leading_lines if line.comment is None]
            continue
        if blanks and not statement.leading_lines:
            statement = statement.with_changes(leading_lines=blanks)
        kept.append(statement)
        blanks = []
    return kept


class MainGuard(Fixer):
    code = "PFL301"

    def rewrite(self, located: Located, diagnostics: Sequence[Diagnostic]) -> cst.Module:
        module = located.module
        plans = [d.fix for d in diagnostics if d.fix is not None]
        lines = {int(line) for plan in plans for line in plan["move"].split(",") if line}
        guard_line = next((int(plan["guard"]) for plan in plans if plan["guard"]), None)
        body = list(module.body)
        moved = [s for s in body if located.positions[s].start.line in lines]
        if len(moved) != len(lines):
            return module  # a part of the plan alone would not keep the order: all of it or nothing
        staying = [s for s in body if s not in moved]
        kept = _keep_spacing(body, moved)
        guard = next((s for s in staying if located.positions[s].start.line == guard_line), None)
        if guard is None:
            spacing = [cst.EmptyLine(), cst.EmptyLine()] if kept else []
            new_guard = under_if('__name__ == "__main__"', _indented(moved), leading_lines=spacing)
            return module.with_changes(body=[*kept, new_guard])
        position = body.index(guard)
        before = _indented([s for s in moved if body.index(s) < position])
        after = _indented([s for s in moved if body.index(s) > position])
        at = staying.index(guard)
        spaced_guard = kept[at]
        assert isinstance(spaced_guard, cst.If) and isinstance(spaced_guard.body, cst.IndentedBlock)
        block = spaced_guard.body
        kept[at] = spaced_guard.with_changes(body=block.with_changes(body=[*before, *block.body, *after]))
        return module.with_changes(body=kept)
