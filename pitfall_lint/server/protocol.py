"""`pitfall-lint server`: the Language Server, on pygls, over stdin and stdout. Imported only by that command.

Findings are published for the open documents of a project whenever one of its files changes, in the editor or on
disk: what one file is told rests on the others (a wrap in train.py makes the forward of models/net.py a finding).
Checks run one at a time beside the protocol, so that a burst of edits costs one check, not one per keystroke.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcMethodNotFound
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace.position_codec import PositionCodec

from pitfall_lint import __version__
from pitfall_lint.diagnostic import PARSE_ERROR, Diagnostic, available_fix
from pitfall_lint.docs import rule_document
from pitfall_lint.selection import rule_infos
from pitfall_lint.server.session import Findings, Session, project_of
from pitfall_lint.source import split_lines
from pitfall_lint.suppress import with_noqa

NAME = "pitfall-lint"
# What can change the findings of an open document: a Python file of its project, a configuration, what git ignores.
WATCHED = ("**/*.py", "**/pyproject.toml", "**/.gitignore")
_SETTINGS_FILES = ("pyproject.toml", ".gitignore")  # may change the configuration, or the project, of any document
_SEVERITIES = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "info": lsp.DiagnosticSeverity.Information,
}

Position = tuple[int, int]  # 0-based line, and column in characters


@dataclass(frozen=True)
class _Published:
    """The findings sent for one version of a document, with its text: code actions and hovers answer from them
    while the document is still at that version."""

    path: str
    version: int | None
    text: str
    lines: list[str]
    diagnostics: list[Diagnostic]
    sent: list[lsp.Diagnostic]

    def at(self, start: Position, end: Position) -> list[tuple[Diagnostic, lsp.Diagnostic]]:
        """The findings whose span meets [start, end], ends included (a parse error spans nothing)."""
        return [(d, s) for d, s in zip(self.diagnostics, self.sent, strict=True) if _start(d) <= end and start <= _end(d)]


def _zero_based(position: tuple[int, int]) -> Position:
    """A 1-based (line, column), as findings and fixes count, as the protocol counts."""
    return position[0] - 1, position[1] - 1


def _start(d: Diagnostic) -> Position:
    return _zero_based((d.line, d.column))


def _end(d: Diagnostic) -> Position:
    return _zero_based((d.end_line, d.end_column))


class PitfallServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(NAME, __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.session = Session()
        self.rule_info = {info.code: info for info in rule_infos()}
        self.shut_down = False
        self._published: dict[str, _Published] = {}  # by URI
        self._stale: set[Path | None] = set()  # project roots whose open documents need checking again
        self._checking: asyncio.Future[None] | None = None  # the checking task while it runs (asyncio holds it weakly)
        self._config_errors: set[str] = set()  # shown to the user once, until they change
        self._logged: set[str] = set()  # internal errors logged once: a check repeats them at every edit

    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        self.window_log_message(lsp.LogMessageParams(kind, message))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """What pygls caught outside our handlers (a message it could not read): logged, and the server goes on."""
        if not isinstance(error, JsonRpcMethodNotFound):  # a request we do not serve is no error of ours
            self.log(f"internal error: {getattr(error, 'message', None) or error}", lsp.MessageType.Error)

    @property
    def codec(self) -> PositionCodec:
        return self.workspace.position_codec

    def current(self, uri: str) -> _Published | None:
        """The findings of the document as it is now; None while its latest text is still being checked."""
        published = self._published.get(uri)
        document = self.workspace.text_documents.get(uri)
        return published if published is not None and document is not None and published.version == document.version else None

    def forget(self, uri: str) -> None:
        self._published.pop(uri, None)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, []))

    def recheck(self, roots: Iterable[Path | None]) -> None:
        """Check the open documents of these projects again, after the check under way if there is one."""
        self._stale.update(roots)
        if self._stale and self._checking is None and not self.shut_down:
            self._checking = asyncio.ensure_future(self._check_stale())

    def recheck_all(self) -> None:
        self.recheck({project_of(path) for path in self._open_documents(None)})

    def _open_documents(self, roots: set[Path | None] | None) -> dict[str, tuple[str, int | None, str]]:
        """Path -> (URI, version, text) of the open files of these projects (None: of every project)."""
        found = {}
        for uri, document in list(self.workspace.text_documents.items()):
            path = _path(uri)
            if path is not None and (roots is None or project_of(path) in roots):
                found[path] = (uri, document.version, document.source)
        return found

    async def _check_stale(self) -> None:
        try:
            while self._stale and not self.shut_down:
                roots, self._stale = self._stale, set()
                documents = self._open_documents(roots)
                buffers = {path: text.encode("utf-8", errors="replace") for path, (_, _, text) in documents.items()}
                try:
                    findings = await asyncio.get_running_loop().run_in_executor(None, self.session.check, buffers)
                except Exception as error:  # a bug of ours: logged, and the next edit is checked again
                    self.log(f"internal error while checking: {type(error).__name__}: {error}", lsp.MessageType.Error)
                    continue
                self._publish(findings, documents)
        finally:
            self._checking = None

    def _publish(self, findings: Findings, documents: dict[str, tuple[str, int | None, str]]) -> None:
        for message in findings.config_errors:
            if message not in self._config_errors:
                self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"{NAME}: {message}"))
        self._config_errors = set(findings.config_errors)
        for message in findings.internal_errors:
            if message not in self._logged:
                self._logged.add(message)
                self.log(message, lsp.MessageType.Error)
        for path, (uri, version, text) in documents.items():
            if uri not in self.workspace.text_documents:
                continue  # closed while it was being checked
            lines = split_lines(text)
            diagnostics = findings.diagnostics.get(path, [])
            sent = [self._diagnostic(d, lines) for d in diagnostics]
            self._published[uri] = _Published(path, version, text, lines, diagnostics, sent)
            self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, sent, version))

    def _diagnostic(self, d: Diagnostic, lines: Sequence[str]) -> lsp.Diagnostic:
        related = [
            lsp.DiagnosticRelatedInformation(
                lsp.Location(from_fs_path(os.path.abspath(r.path)), lsp.Range(lsp.Position(r.line - 1, 0), lsp.Position(r.line - 1, 0))),
                r.message,
            )
            for r in d.related
        ]
        return lsp.Diagnostic(
            self.client_range(lines, _start(d), _end(d)), d.message, _SEVERITIES[d.severity], d.code,
            source=NAME, related_information=related or None,
        )

    def client_range(self, lines: Sequence[str], start: Position, end: Position) -> lsp.Range:
        """Our 0-based (line, character) span in the client's units (UTF-16 unless it chose another)."""
        span = lsp.Range(lsp.Position(*start), lsp.Position(*end))
        return self.codec.range_to_client_units(lines, span)


def _path(uri: str) -> str | None:
    """The file a document is; None for one that is no file (an unsaved, untitled buffer)."""
    return to_fs_path(uri) if uri.startswith("file:") else None


Handler = Callable[..., Any]
_HANDLERS: list[tuple[str, Any, Handler]] = []


def _handles(method: str, options: Any = None) -> Callable[[Handler], Handler]:
    """Registers the handler of a method. An error in it is logged as one line and answered with no result: one
    bad request never stops the server."""

    def register(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def guarded(ls: PitfallServer, *args: Any) -> Any:
            try:
                return handler(ls, *args)
            except Exception as error:
                ls.log(f"internal error in {method}: {type(error).__name__}: {error}", lsp.MessageType.Error)
                return None

        _HANDLERS.append((method, options, guarded))
        return handler

    return register


@_handles(lsp.INITIALIZED)
def _initialized(ls: PitfallServer, params: lsp.InitializedParams) -> None:
    """Asks the client to tell of files changed by other tools, where it lets servers ask (VS Code, Neovim)."""
    workspace = ls.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace is not None else None
    if watched is not None and watched.dynamic_registration:
        options = lsp.DidChangeWatchedFilesRegistrationOptions([lsp.FileSystemWatcher(glob_pattern=p) for p in WATCHED])
        registration = lsp.Registration(f"{NAME}-watched-files", lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, options)
        ls.client_register_capability(lsp.RegistrationParams([registration]))


@_handles(lsp.SHUTDOWN)
def _shutdown(ls: PitfallServer, *args: Any) -> None:
    ls.shut_down = True


@_handles(lsp.TEXT_DOCUMENT_DID_OPEN)
def _did_open(ls: PitfallServer, params: lsp.DidOpenTextDocumentParams) -> None:
    _recheck_project_of(ls, params.text_document.uri)


@_handles(lsp.TEXT_DOCUMENT_DID_CHANGE)
def _did_change(ls: PitfallServer, params: lsp.DidChangeTextDocumentParams) -> None:
    _recheck_project_of(ls, params.text_document.uri)


@_handles(lsp.TEXT_DOCUMENT_DID_SAVE)
def _did_save(ls: PitfallServer, params: lsp.DidSaveTextDocumentParams) -> None:
    _recheck_project_of(ls, params.text_document.uri)


@_handles(lsp.TEXT_DOCUMENT_DID_CLOSE)
def _did_close(ls: PitfallServer, params: lsp.DidCloseTextDocumentParams) -> None:
    """Its findings are cleared; the others of its project are checked against the file on disk again."""
    ls.forget(params.text_document.uri)
    _recheck_project_of(ls, params.text_document.uri)


def _recheck_project_of(ls: PitfallServer, uri: str) -> None:
    path = _path(uri)
    if path is not None:
        ls.recheck({project_of(path)})


@_handles(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def _watched_files_changed(ls: PitfallServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    paths = [path for change in params.changes if (path := _path(change.uri)) is not None]
    if any(os.path.basename(path) in _SETTINGS_FILES for path in paths):
        ls.recheck_all()
    else:
        ls.recheck({project_of(path) for path in paths})


def _wants_quick_fixes(only: Sequence[str] | None) -> bool:
    """Whether the kinds asked for (none: every kind) hold `quickfix`: a save's `source.organizeImports` does not."""
    kind = lsp.CodeActionKind.QuickFix.value
    return only is None or any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


@_handles(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
def _code_actions(ls: PitfallServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    """For each finding in the range: its fix where `check --fix` has one (an unsafe one says so), and a `# noqa`
    comment for its line."""
    published = ls.current(params.text_document.uri)
    if published is None or not _wants_quick_fixes(params.context.only):
        return []
    asked = ls.codec.range_from_client_units(published.lines, params.range)
    found = published.at((asked.start.line, asked.start.character), (asked.end.line, asked.end.character))
    fixes = {d: kind for d, _ in found if (kind := available_fix(d, ls.rule_info.get(d.code))) is not None}
    edits = {}
    if fixes:
        from pitfall_lint.fix.edits import replacements  # libcst, only when there is a fix to offer

        edits = replacements(published.path, list(fixes), published.text.encode("utf-8", errors="replace"))
    uri = params.text_document.uri
    actions = []
    for d, sent in found:
        if d in edits:
            replacement = edits[d]
            safe = fixes[d] == "safe"
            where = ls.client_range(published.lines, _zero_based(replacement.start), _zero_based(replacement.end))
            actions.append(
                lsp.CodeAction(
                    f"Fix {d.code} ({d.name})" if safe else f"Fix {d.code} ({d.name}), unsafe: it may change behaviour",
                    lsp.CodeActionKind.QuickFix,
                    diagnostics=[sent],
                    is_preferred=safe,
                    edit=lsp.WorkspaceEdit(changes={uri: [lsp.TextEdit(where, replacement.text)]}),
                )
            )
        noqa = _noqa_edit(ls, published.lines, d)
        if noqa is not None:
            actions.append(
                lsp.CodeAction(
                    f"Ignore {d.code} on this line (# noqa: {d.code})",
                    lsp.CodeActionKind.QuickFix,
                    diagnostics=[sent],
                    edit=lsp.WorkspaceEdit(changes={uri: [noqa]}),
                )
            )
    return actions


def _noqa_edit(ls: PitfallServer, lines: Sequence[str], d: Diagnostic) -> lsp.TextEdit | None:
    """The change to the finding's first line that suppresses it, as small as it is; None where no comment can
    suppress it: a file that does not parse is never checked for one."""
    if d.code == PARSE_ERROR.code or not 0 < d.line <= len(lines):
        return None
    line = lines[d.line - 1]
    new = with_noqa(line, d.code)
    if new is None:
        return None
    kept = len(os.path.commonprefix([line, new]))
    tail = len(os.path.commonprefix([line[kept:][::-1], new[kept:][::-1]]))
    where = ls.client_range(lines, (d.line - 1, kept), (d.line - 1, len(line) - tail))
    return lsp.TextEdit(where, new[kept : len(new) - tail])


@_handles(lsp.TEXT_DOCUMENT_HOVER)
def _hover(ls: PitfallServer, params: lsp.HoverParams) -> lsp.Hover | None:
    """The document of each rule with a finding under the cursor."""
    published = ls.current(params.text_document.uri)
    if published is None:
        return None
    at = ls.codec.position_from_client_units(published.lines, params.position)
    found = published.at((at.line, at.character), (at.line, at.character))
    if not found:
        return None
    documents = dict.fromkeys(rule_document(d.code, d.name) or f"{d.code} {d.name}" for d, _ in found)
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, "\n\n---\n\n".join(documents)), found[0][1].range)


def create_server() -> PitfallServer:
    server = PitfallServer()
    for method, options, handler in _HANDLERS:
        server.feature(method, options)(handler)
    return server


def serve() -> int:
    """Serves until the client says exit, or closes stdin: 0 after a shutdown request, as the protocol asks, else 1."""
    server = create_server()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout is the protocol's: a stray print must not break a message
    server.start_io(stdin, stdout)
    return 0 if server.shut_down else 1
