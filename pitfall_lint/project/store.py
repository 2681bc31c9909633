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
    run whose results all hold never needs a summary.

    Beside them, each file's stamp: its size and time of change when it was last read, with what was read then (its
    content key, facts of its bytes). While a file keeps its stamp, a run knows its key without reading it: the
    cost of a warm run, or of one file changed, no longer grows with the bytes of the whole project."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder
        tag = hashlib.blake2b(f"{__version__}/{FORMAT}".encode(), digest_size=8).hexdigest()
        self._name = f"summaries-{tag}.json"
        self._stamps_name = f"stamps-{tag}.json"
        self._loaded: dict[str, list] | None = None if folder is not None else {}
        self._loaded_stamps: dict[str, list] | None = None if folder is not None else {}
        self._dirty = False
        self._stamps_dirty = False

    def _read(self, name: str) -> dict[str, list]:
        assert self._folder is not None
        try:
            found = json.loads((self._folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # no cache yet, or an unreadable one: start afresh
        return found if isinstance(found, dict) else {}

    @property
    def _rows(self) -> dict[str, list]:
        if self._loaded is None:
            self._loaded = self._read(self._name)
        return self._loaded

    @property
    def stamps(self) -> dict[str, list]:
        """[size, time of change in ns, content key, facts...] by absolute path; the model adds to it through
        `stamp`."""
        if self._loaded_stamps is None:
            self._loaded_stamps = self._read(self._stamps_name)
        return self._loaded_stamps

    def stamp(self, path: str, stamp: list) -> None:
        if self.stamps.get(path) != stamp:
            self.stamps[path] = stamp
            self._stamps_dirty = True

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
        if self._folder is not None:
            for dirty, name, document in ((self._dirty, self._name, self._loaded), (self._stamps_dirty, self._stamps_name, self._loaded_stamps)):
                if dirty:
                    try:
                        write_json_atomically(self._folder, name, document)
                    except OSError:
                        pass  # a read-only checkout simply gets no cache
        self._dirty = self._stamps_dirty = False
