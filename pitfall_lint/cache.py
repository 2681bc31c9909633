"""Results of unchanged files, reused: keyed by file content, tool version, the rules that ran and the folder's place.

Stored under the project in `.pitfall_lint_cache/` (safe to delete; it ignores itself in git), for each configuration
in shards by the path's hash, each written atomically so that concurrent runs never read half a file: a run on one
changed file (pre-commit) reads and writes one shard, not the results of the whole project (one file of them took a
tenth of such a run on diffusers, read and written again).
A result that rests on other files of the project is kept with the questions its rules asked the project
model and the answers they got; it is reused only while the project still gives the same answers. Each entry
also keeps the fingerprint of the project it was last known to hold for: while nothing in the project changed,
no question is asked again (what keeps a warm run of a large project fast).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import astuple
from pathlib import Path
from typing import Any

from pitfall_lint import __version__
from pitfall_lint.diagnostic import Diagnostic, FixPlan, Related
from pitfall_lint.engine import FileResult
from pitfall_lint.hashing import blake2b
from pitfall_lint.project.store import FOLDER, read_json_object, write_json_atomically

_ROW_FORMAT = 4  # the Diagnostic's own fields, then the fix plan, then the related places; entries end in a fingerprint


def _to_row(diagnostic: Diagnostic) -> list[object]:
    *fields, _, _ = astuple(diagnostic)
    facts = [list(fact) for fact in diagnostic.fix.facts] if diagnostic.fix else None
    return [*fields, facts, [astuple(r) for r in diagnostic.related]]


def _from_row(row: list[Any]) -> Diagnostic:
    *fields, facts, related = row
    plan = FixPlan(tuple((key, value) for key, value in facts)) if facts is not None else None
    return Diagnostic(*fields, fix=plan, related=tuple(Related(*r) for r in related))  # type: ignore[misc]


class ResultCache:
    def __init__(self, root: Path, rule_codes: Iterable[str], settings: object = None) -> None:
        """`settings`: whatever else changes the results (the model's mode, the target Python), as plain data. The
        folder's own place is part of the key, as in Ruff: the questions a result rests on name the project's files
        by where they lay, and a copy of the project (a CI cache restored elsewhere) would answer them wrongly."""
        key = json.dumps([__version__, _ROW_FORMAT, sorted(rule_codes), settings, os.path.abspath(root)])
        self.folder = root / FOLDER
        self._prefix = f"results-{blake2b(key.encode(), digest_size=8).hexdigest()}-"
        self._shards: dict[str, dict[str, list]] = {}  # each read on its first use
        self._shard_names: dict[str, str] = {}  # by path
        self._dirty: set[str] = set()

    def _entries(self, path: str) -> dict[str, list]:
        """The shard of the path's entry: one of 16, by the first digit of the path's hash."""
        name = self._shard_names.get(path)
        if name is None:
            name = self._shard_names[path] = blake2b(path.encode("utf-8", "surrogateescape"), digest_size=1).hexdigest()[0]
        if name not in self._shards:
            self._shards[name] = read_json_object(self.folder / f"{self._prefix}{name}.json")
        return self._shards[name]

    def get(self, path: str, key: str) -> FileResult | None:
        """The stored result of this content; its questions still have to be asked again by the caller."""
        entry = self._entries(path).get(path)
        if entry is None or len(entry) != 4 or entry[0] != key:
            return None
        try:
            questions = tuple((question, tuple(arguments), answer) for question, arguments, answer in entry[2])
            return FileResult(path, tuple(_from_row(row) for row in entry[1]), questions=questions)
        except (TypeError, ValueError, IndexError):
            return None  # written by another version of the row format: check the file afresh

    def holds_for(self, path: str) -> str | None:
        """The fingerprint of the project the stored result of this file was last known to hold for."""
        entry = self._entries(path).get(path)
        return entry[3] if entry is not None else None

    def confirm(self, path: str, fingerprint: str) -> None:
        """The stored result still holds for the project with this fingerprint (its questions were asked again)."""
        entry = self._entries(path).get(path)
        if entry is not None and entry[3] != fingerprint:
            entry[3] = fingerprint
            self._dirty.add(self._shard_names[path])

    def put(self, path: str, key: str, result: FileResult, fingerprint: str) -> None:
        if result.internal_error is None:  # a crash of ours is reported again next time
            questions = [[question, list(arguments), answer] for question, arguments, answer in result.questions]
            self._entries(path)[path] = [key, [_to_row(d) for d in result.diagnostics], questions, fingerprint]
            self._dirty.add(self._shard_names[path])

    def save(self) -> None:
        """The shards that changed."""
        for name in sorted(self._dirty):
            try:
                write_json_atomically(self.folder, f"{self._prefix}{name}.json", self._shards[name])
            except OSError:
                break  # a read-only checkout simply gets no cache
        self._dirty.clear()
