"""One file: trigger prefilter, one parse, one traversal shared by all rules, then suppression."""

from __future__ import annotations

import ast
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import PARSE_ERROR, Diagnostic
from pitfall_lint.notebook import NOTEBOOK_SUFFIX, NotebookError, NotebookSource, read_notebook
from pitfall_lint.rules.base import Rule
from pitfall_lint.source import SourceText, decoding_error
from pitfall_lint.suppress import is_suppressed


@dataclass(frozen=True, slots=True)
class FileResult:
    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    # A bug of ours met while checking this file; the other files are still checked.
    internal_error: str | None = None


def _parse_error(path: str, message: str, line: int = 1, column: int = 1) -> FileResult:
    info = PARSE_ERROR
    diagnostic = Diagnostic(path, line, column, info.code, info.name, line, column, info.severity, message)
    return FileResult(path, (diagnostic,))


def _in_cells(diagnostic: Diagnostic, notebook: NotebookSource) -> Diagnostic:
    cell, line = notebook.origin(diagnostic.line)
    end_cell, end_line = notebook.origin(diagnostic.end_line)
    return replace(diagnostic, cell=cell, line=line, end_line=end_line if end_cell == cell else line)


def _describe_internal_error(error: Exception) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "pitfall_lint" in f.filename]
    where = f" at {frames[-1].filename.rpartition('pitfall_lint')[2].lstrip('/')}:{frames[-1].lineno}" if frames else ""
    return f"internal error{where}: {type(error).__name__}: {error}"


# Fields that never hold a node a rule could want: expression contexts and operators.
_SKIPPED_FIELDS = frozenset({"ctx", "op", "ops"})
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}
_LEAF_TYPES = frozenset({ast.Name, ast.Constant})


def _child_fields(node_type: type[ast.AST]) -> tuple[str, ...]:
    return tuple(reversed([f for f in node_type._fields if f not in _SKIPPED_FIELDS]))


class Engine:
    def __init__(self, rules: Sequence[type[Rule]]) -> None:
        self._rules = tuple(rule for rule in rules if not rule.runtime_only)
        self._trigger_bytes = [tuple(tuple(t.encode() for t in group) for group in rule.triggers) for rule in self._rules]

    def check_file(self, path: str) -> FileResult:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            return _parse_error(path, f"cannot read file: {error.strerror or error}")
        return self.check_source(path, data)

    def check_files(self, paths: Iterable[str]) -> Iterator[FileResult]:
        for path in paths:
            yield self.check_file(path)

    def check_source(self, path: str, data: bytes) -> FileResult:
        if not path.endswith(NOTEBOOK_SUFFIX):
            return self._check_python(path, data)
        try:
            notebook = read_notebook(data)
        except NotebookError as error:
            return _parse_error(path, str(error))
        result = self._check_python(path, notebook.text.encode("utf-8"))
        return replace(result, diagnostics=tuple(sorted(_in_cells(d, notebook) for d in result.diagnostics)))

    def _check_python(self, path: str, data: bytes) -> FileResult:
        applicable = [
            rule
            for rule, groups in zip(self._rules, self._trigger_bytes)
            if all(any(word in data for word in group) for group in groups)
        ]
        if not applicable:
            # Not parsed, which is what keeps the linter fast; undecodable bytes are still worth a word.
            reason = decoding_error(data)
            return _parse_error(path, f"cannot decode: {reason}") if reason else FileResult(path)
        try:
            with warnings.catch_warnings():
                # The compiler's own warnings (invalid escapes, `1()`) are not ours to print.
                warnings.simplefilter("ignore")
                tree = ast.parse(data, filename=path)
        except SyntaxError as error:
            return _parse_error(path, f"cannot parse: {error.msg}", error.lineno or 1, max(error.offset or 1, 1))
        except (ValueError, MemoryError, RecursionError) as error:
            return _parse_error(path, f"cannot parse: {error}")
        text = SourceText(data)
        ctx = FileContext(path, tree, text)
        try:
            rules = [rule(ctx) for rule in applicable]
            self._traverse(ctx, rules)
            for rule in rules:
                rule.finish()
        except Exception as error:  # one bad file must never stop the others
            return FileResult(path, internal_error=_describe_internal_error(error))
        kept = (d for d in ctx.diagnostics if not is_suppressed(d.code, text.line(d.line)))
        return FileResult(path, tuple(sorted(set(kept))))

    @staticmethod
    def _traverse(ctx: FileContext, rules: Sequence[Rule]) -> None:
        dispatch: dict[type[ast.AST], list[Callable[[ast.AST], None]]] = {}
        for rule in rules:
            for node_type in rule.subscriptions:
                dispatch.setdefault(node_type, []).append(rule.visit)
        for node_type in (ast.Import, ast.ImportFrom):
            dispatch.setdefault(node_type, []).insert(
                0, lambda node: ctx.resolver.note_local_import(node, ctx.ancestors)  # type: ignore[arg-type]
            )
        ancestors = ctx.ancestors
        stack: list[tuple[ast.AST, int]] = [(ctx.tree, 0)]
        fields_of = _CHILD_FIELDS
        # Names and constants are half of all nodes and have no children: skip them unless subscribed.
        leaves = _LEAF_TYPES.difference(dispatch)
        while stack:
            node, depth = stack.pop()
            del ancestors[depth:]
            node_type = type(node)
            handlers = dispatch.get(node_type)
            if handlers:
                for handler in handlers:
                    handler(node)
            ancestors.append(node)
            fields = fields_of.get(node_type)
            if fields is None:
                fields = fields_of[node_type] = _child_fields(node_type)
            depth += 1
            # Children are pushed last-first so that they pop in source order.
            for name in fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    for item in reversed(value):
                        if isinstance(item, ast.AST) and type(item) not in leaves:
                            stack.append((item, depth))
                elif isinstance(value, ast.AST) and type(value) not in leaves:
                    stack.append((value, depth))
