"""PFL301: the top-level statements that start processes (and those that use what they bound) moved under
`if __name__ == "__main__":`: into the file's existing guard if it has one, else a new one at the end."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.fix.base import Fixer, Located, Statement, under_if

_MAIN_TESTS = frozenset({'__name__=="__main__"', '"__main__"==__name__'})


def _is_main_guard(module: cst.Module, statement: Statement) -> bool:
    if not isinstance(statement, cst.If) or statement.orelse is not None:
        return False
    return module.code_for_node(statement.test).replace(" ", "").replace("'", '"') in _MAIN_TESTS


def _indented(statements: list[Statement]) -> list[Statement]:
    """Blank lines that separated a statement at module level do not belong at the top of a block."""
    if not statements:
        return statements
    first, *rest = statements
    lines = list(first.leading_lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return [first.with_changes(leading_lines=lines), *rest]


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
        lines = {int(line) for d in diagnostics if d.fix is not None for line in d.fix["move"].split(",") if line}
        body = list(module.body)
        moved = [s for s in body if located.positions[s].start.line in lines]
        if not moved:
            return module
        staying = [s for s in body if s not in moved]
        kept = _keep_spacing(body, moved)
        guard = next((s for s in staying if _is_main_guard(module, s)), None)
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
