"""Results of unchanged files, reused: keyed by file content, tool version and the rules that ran.

Stored under the project in `.pitfall_lint_cache/` (safe to delete; it ignores itself in git),
one file per configuration, written atomically so that concurrent runs never read half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import astuple
from pathlib import Path
from typing import Any

from pitfall_lint import __version__
from pitfall_lint.diagnostic import Diagnostic, FixPlan
from pitfall_lint.engine import FileResult

FOLDER = ".pitfall_lint_cache"


_ROW_FORMAT = 2  # the Diagnostic fields, the fix plan last


def _to_row(diagnostic: Diagnostic) -> list[object]:
    *fields, fix = astuple(diagnostic)
    return [*fields, [list(fact) for fact in diagnostic.fix.facts] if diagnostic.fix else None]


def _from_row(row: list[Any]) -> Diagnostic:
    *fields, facts = row
    plan = FixPlan(tuple((key, value) for key, value in facts)) if facts is not None else None
    return Diagnostic(*fields, fix=plan)  # type: ignore[misc]  # `fields` stops before `fix`


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class ResultCache:
    def __init__(self, root: Path, rule_codes: Iterable[str]) -> None:
        settings = json.dumps([__version__, _ROW_FORMAT, sorted(rule_codes)])
        self._folder = root / FOLDER
        self._file = self._folder / f"results-{hashlib.blake2b(settings.encode(), digest_size=8).hexdigest()}.json"
        self._entries: dict[str, list] = {}
        self._dirty = False
        try:
            self._entries = json.loads(self._file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass  # no cache yet, or an unreadable one: start afresh

    def get(self, path: str, key: str) -> FileResult | None:
        entry = self._entries.get(path)
        if entry is None or entry[0] != key:
            return None
        try:
            return FileResult(path, tuple(_from_row(row) for row in entry[1]))
        except (TypeError, ValueError):
            return None  # written by another version of the row format: check the file afresh

    def put(self, path: str, key: str, result: FileResult) -> None:
        if result.internal_error is None:  # a crash of ours is reported again next time
            self._entries[path] = [key, [_to_row(d) for d in result.diagnostics]]
            self._dirty = True

    def save(self) -> None:
        if not self._dirty:
            return
        try:
            self._folder.mkdir(exist_ok=True)
            ignore = self._folder / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Created by pitfall-lint: safe to delete.\n*\n")
            descriptor, temporary = tempfile.mkstemp(dir=self._folder, prefix=".tmp-")
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(self._entries, handle, separators=(",", ":"))
            os.replace(temporary, self._file)
        except OSError:
            pass  # a read-only checkout simply gets no cache
