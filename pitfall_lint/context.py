"""What a rule sees of the file being checked."""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pitfall_lint.diagnostic import Diagnostic, FixPlan, Related, RuleInfo
from pitfall_lint.names import NameResolver
from pitfall_lint.source import SourceText

if TYPE_CHECKING:
    from pitfall_lint.project.model import ProjectView


class FileContext:
    """Shared by every rule during the single traversal of one file."""

    def __init__(self, path: str, tree: ast.Module, text: SourceText, project: ProjectView) -> None:
        self.path = path
        self.tree = tree
        self.text = text
        # The rest of the project, for the facts one file cannot tell (where a class is wrapped, who calls a function).
        self.project = project
        self.resolver = NameResolver(tree)
        # The nodes enclosing the node being visited, outermost first; kept by the engine.
        self.ancestors: list[ast.AST] = []
        self.diagnostics: list[Diagnostic] = []
        # Per-file memo for the analysis helpers, so each fact is computed once for all rules.
        self.memo: dict[object, object] = {}
        self._names: dict[int, str | None] = {}

    def for_another_walk(self) -> FileContext:
        """The same file for a walk made while the engine's is under way (a summary asked for by a rule):
        its own ancestors and diagnostics; the tree, the names and the memo shared."""
        other = copy.copy(self)
        other.ancestors = []
        other.diagnostics = []
        return other

    @property
    def is_notebook(self) -> bool:
        return self.path.endswith(".ipynb")

    def qualified_name(self, expr: ast.AST, ancestors: Sequence[ast.AST] | None = None) -> str | None:
        """Resolved in the scope of the node being visited, unless other ancestors are given."""
        if ancestors is not None:
            return self.resolver.qualified_name(expr, ancestors)
        # Several rules ask about the same call during the traversal: resolve it once.
        key = id(expr)
        if key not in self._names:
            self._names[key] = self.resolver.qualified_name(expr, self.ancestors)
        return self._names[key]

    def report(
        self, info: RuleInfo, node: ast.AST, message: str, fix: FixPlan | None = None, related: tuple[Related, ...] = ()
    ) -> None:
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or line
        column = self.text.column(line, getattr(node, "col_offset", 0))
        end_offset = getattr(node, "end_col_offset", None)
        end_column = self.text.column(end_line, end_offset) if end_offset is not None else column
        self.diagnostics.append(
            Diagnostic(
                path=self.path,
                line=line,
                column=column,
                code=info.code,
                name=info.name,
                end_line=end_line,
                end_column=end_column,
                severity=info.severity,
                message=message,
                fix=fix,
                related=related,
            )
        )
