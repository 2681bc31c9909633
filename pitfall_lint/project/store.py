"""Summaries of files cached by content, beside the results in `.pitfall_lint_cache/`."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from pitfall_lint import __version__
from pitfall_lint.project.summary import FORMAT

FOLDER = ".pitfall_lint_cache"


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def write_json_atomically(folder: Path, name: str, document: object) -> None:
    """The whole file or the old one, never half of one, in a folder that ignores itself in git."""
    folder.mkdir(exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Created by pitfall-lint: safe to delete.\n*\n")
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(document, separators=(",", ":")))  # dumps: json's C encoder, dump has none
        os.replace(temporary, folder / name)
    except BaseException:
        os.unlink(temporary)
        raise


class SummaryStore:
    """Summary rows by content key; `None` as the folder keeps them in memory only. Read on the first use: a warm
    run whose results all hold never needs a summary."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder
        self._name = f"summaries-{hashlib.blake2b(f'{__version__}/{FORMAT}'.encode(), digest_size=8).hexdigest()}.json"
        self._loaded: dict[str, list] | None = None if folder is not None else {}
        self._dirty = False

    @property
    def _rows(self) -> dict[str, list]:
        if self._loaded is None:
            assert self._folder is not None
            try:
                self._loaded = json.loads((self._folder / self._name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                self._loaded = {}  # no cache yet, or an unreadable one: start afresh
        return self._loaded

    @property
    def keeps(self) -> bool:
        """Whether what is put here outlives the run."""
        return self._folder is not None

    def get(self, key: str) -> list | None:
        return self._rows.get(key)

    def put_all(self, rows: dict[str, list]) -> None:
        new = {k: v for k, v in rows.items() if k not in self._rows}
        if new:
            self._rows.update(new)
            self._dirty = True

    def save(self) -> None:
        if self._dirty and self._folder is not None:
            try:
                write_json_atomically(self._folder, self._name, self._rows)
            except OSError:
                pass  # a read-only checkout simply gets no cache
            self._dirty = False
