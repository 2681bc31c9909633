"""PFL201: the save under a rank-0 guard, spelled with the rank variable in scope or `dist.get_rank() == 0`.

Unsafe: the other ranks no longer write, so code that reads the file back on them needs a barrier (PFL204).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.fix.base import Fixer, Located, replace_nodes, under_if


def _guarded_statement(located: Located, call: cst.Call) -> cst.SimpleStatementLine | cst.With | None:
    """The save's statement, or the `with` block it is alone in (`with open(path, "wb") as f:` truncates too)."""
    line = located.statement_of(call)
    if line is None or len(line.body) != 1:
        return None
    block = located.parents.get(line)
    holder = located.parents.get(block) if isinstance(block, cst.IndentedBlock) and len(block.body) == 1 else None
    return holder if isinstance(holder, cst.With) else line


def _has_import(module: cst.Module, dotted: str) -> bool:
    for line in module.body:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Import) and any(
                alias.asname is None and module.code_for_node(alias.name) == dotted for alias in small.names
            ):
                return True
    return False


def _with_import(module: cst.Module, dotted: str) -> cst.Module:
    """`import dotted` after the module's last top-level import (or at the top, after a docstring)."""
    if _has_import(module, dotted):
        return module
    body = list(module.body)
    imports = [
        i for i, line in enumerate(body)
        if isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], (cst.Import, cst.ImportFrom))
    ]
    docstring = bool(body) and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) and isinstance(
        body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)
    )
    at = imports[-1] + 1 if imports else int(docstring)
    body.insert(at, cst.parse_statement(f"import {dotted}\n"))
    return module.with_changes(body=body)


class RankZeroGuard(Fixer):
    code = "PFL201"

    def rewrite(self, located: Located, diagnostics: Sequence[Diagnostic]) -> cst.Module:
        statements: dict[cst.SimpleStatementLine | cst.With, str] = {}
        imports: set[str] = set()
        for call, plan in located.at(cst.Call, diagnostics).items():
            statement = _guarded_statement(located, call)
            if statement is not None:
                statements[statement] = plan["guard"]
                imports |= {plan["import"]} - {""}
        module = replace_nodes(located.module, statements, lambda statement, guard: under_if(guard, [statement]))
        for dotted in sorted(imports):
            module = _with_import(module, dotted)
        return module
