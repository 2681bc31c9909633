"""One file: trigger prefilter, one parse, one traversal shared by all rules, then suppression (noqa, ranges)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pitfall_lint.context import FileContext
from pitfall_lint.diagnostic import PARSE_ERROR, Diagnostic
from pitfall_lint.notebook import NOTEBOOK_SUFFIX, NotebookError, NotebookSource, read_notebook
from pitfall_lint.parsing import newer_than_target, target_message
from pitfall_lint.project.model import ProjectModel, Question
from pitfall_lint.rules.base import Rule
from pitfall_lint.rules.registry import RuleSpec
from pitfall_lint.source import SourceText, decoding_error, distinct_words
from pitfall_lint.suppress import without_suppressed
from pitfall_lint.traversal import Handler, traverse

PYTHON_SUFFIX = ".py"


@dataclass(frozen=True, slots=True)
class FileResult:
    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    # A bug of ours met while checking this file; the other files are still checked.
    internal_error: str | None = None
    # What the rules asked the project model, with its answers: the result holds while they do.
    questions: tuple[Question, ...] = ()
    # Summaries of project files computed on the way, by content key, for the cache.
    summaries: dict[str, list] = field(default_factory=dict, compare=False)


def _fewest_words(group: tuple[str, ...]) -> tuple[bytes, ...]:
    """The group's words without those that spell another of them: `all_gather` is in a file exactly where `gather`
    is too, which is enough for the group (the 45 words of the collectives are 17)."""
    return tuple(word.encode() for word in group if not any(other != word and other in word for other in group))


def _engine_diagnostic(path: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    info = PARSE_ERROR
    return Diagnostic(path, line, column, info.code, info.name, line, column, info.severity, message)


def _parse_error(path: str, message: str, line: int = 1, column: int = 1) -> FileResult:
    return FileResult(path, (_engine_diagnostic(path, message, line, column),))


def _in_cells(diagnostic: Diagnostic, notebook: NotebookSource) -> Diagnostic:
    cell, line = notebook.origin(diagnostic.line)
    end_cell, end_line = notebook.origin(diagnostic.end_line)
    same_cell = end_cell == cell
    return replace(
        diagnostic,
        cell=cell,
        line=line,
        column=diagnostic.column + notebook.dedent(diagnostic.line),
        end_line=end_line if same_cell else line,
        end_column=diagnostic.end_column + notebook.dedent(diagnostic.end_line) if same_cell else diagnostic.end_column,
    )


def _describe_internal_error(error: Exception) -> str:
    import traceback  # here: only a bug of ours needs it, and every run would pay for its import

    frames = [f for f in traceback.extract_tb(error.__traceback__) if "pitfall_lint" in f.filename]
    where = f" at {frames[-1].filename.rpartition('pitfall_lint')[2].lstrip('/')}:{frames[-1].lineno}" if frames else ""
    return f"internal error{where}: {type(error).__name__}: {error}"


class Engine:
    def __init__(self, rules: Sequence[RuleSpec]) -> None:
        self._rules = tuple(rule for rule in rules if not rule.runtime_only)
        self._trigger_bytes = [tuple(_fewest_words(group) for group in rule.triggers) for rule in self._rules]
        # The words of identifier characters alone, looked for among the file's distinct words instead of all its bytes.
        self._identifier_words = frozenset(
            word for groups in self._trigger_bytes for group in groups for word in group if word.replace(b"_", b"").isalnum()
        )
        # The codes a range suppression can be told unused for: those of the rules this engine runs.
        self._judged = frozenset(rule.info.code for rule in self._rules)

    def _applicable(self, path: str, data: bytes) -> list[type[Rule]]:
        """The rules for this kind of file whose trigger words it holds: the others cannot report anything. A rule's
        module is imported here, for the first file that holds its words."""
        # What is not a notebook is Python whatever its name: a script `launch` with a python shebang is named too.
        kind = NOTEBOOK_SUFFIX if path.endswith(NOTEBOOK_SUFFIX) else PYTHON_SUFFIX
        # Each word searched for once, most of them among the file's distinct words: the rules share many (95 words for
        # 177 uses), and a word the file does not hold cost a read of all its bytes each time (a fifth of a check of
        # diffusers went to these searches).
        present: dict[bytes, bool] = {}
        words: bytes | None = None

        def holds_one(group: tuple[bytes, ...]) -> bool:
            nonlocal words
            for word in group:
                found = present.get(word)
                if found is None:
                    if word in self._identifier_words:
                        words = distinct_words(data) if words is None else words
                        found = word in words
                    else:
                        found = word in data
                    present[word] = found
                if found:
                    return True
            return False

        triggered = (
            rule.load()
            for rule, groups in zip(self._rules, self._trigger_bytes)
            if kind in rule.suffixes and all(map(holds_one, groups))
        )
        return [rule for rule in triggered if rule.may_apply(data)]

    def check_file(self, path: str, project: ProjectModel | None = None) -> FileResult:
        """The file as its project read it, where it did (a worker holds what the main process read for the project's
        questions), else as it is on disk."""
        data = project.content(path) if project is not None else None
        if data is None:
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError as error:
                return _parse_error(path, f"cannot read file: {error.strerror or error}")
        return self.check_source(path, data, project)

    def check_source(self, path: str, data: bytes, project: ProjectModel | None = None) -> FileResult:
        """Without a project, the file is a project of its own."""
        project = project or ProjectModel.single_file(path, data)
        if not path.endswith(NOTEBOOK_SUFFIX):
            return self._check_python(path, data, data, project)
        try:
            notebook = read_notebook(data)
        except NotebookError as error:
            return _parse_error(path, str(error))
        result = self._check_python(path, notebook.text.encode("utf-8"), data, project)
        return replace(result, diagnostics=tuple(sorted(_in_cells(d, notebook) for d in result.diagnostics)))

    def _check_python(self, path: str, data: bytes, content: bytes, project: ProjectModel) -> FileResult:
        view = project.view_for_check(path)
        applicable = [rule for rule in self._applicable(path, data) if rule.may_apply_in(view)]
        if not applicable:
            # Not parsed, which is what keeps the linter fast; undecodable bytes are still worth a word. What the
            # project was asked decides this result too: it holds while the answers do.
            reason = decoding_error(data)
            if reason:
                return _parse_error(path, f"cannot decode: {reason}")
            # No rule can report here: every range suppression the file holds is unused.
            unused = without_suppressed(path, data, (), SourceText(data).line, self._judged)
            project.withdraw(path)
            return FileResult(path, tuple(unused), questions=view.questions(), summaries=project.take_fresh_summaries())
        try:
            parsed = project.parse(path, data)
        except SyntaxError as error:
            return _parse_error(path, f"cannot parse: {error.msg}", error.lineno or 1, max(error.offset or 1, 1))
        except (ValueError, MemoryError, RecursionError) as error:
            return _parse_error(path, f"cannot parse: {error}")
        text = SourceText(data)
        ctx = FileContext(path, parsed.tree, text if parsed.data is data else SourceText(parsed.data), view)
        target = project.target
        if target is not None:  # syntax newer than the project's Python: an error, and still the rules run
            ctx.diagnostics.extend(
                _engine_diagnostic(path, target_message(feature, target), feature.line, feature.column)
                for feature in newer_than_target(parsed, target)
            )
        project.offer(path, ctx, content)
        try:
            rules = [rule(ctx) for rule in applicable]
            self._traverse(ctx, rules)
            for rule in rules:
                rule.finish()
        except Exception as error:  # one bad file must never stop the others
            return FileResult(path, internal_error=_describe_internal_error(error))
        finally:
            project.withdraw(path)
        kept = without_suppressed(path, parsed.data, ctx.diagnostics, text.line, self._judged)
        return FileResult(path, tuple(sorted(set(kept))), questions=view.questions(), summaries=project.take_fresh_summaries())

    @staticmethod
    def _traverse(ctx: FileContext, rules: Sequence[Rule]) -> None:
        dispatch: dict[type[ast.AST], list[Handler]] = {}
        for rule in rules:
            for node_type in rule.subscriptions:
                dispatch.setdefault(node_type, []).append(rule.visit)
        traverse(ctx, dispatch)
