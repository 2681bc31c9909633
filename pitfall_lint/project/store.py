"""Summaries of files cached by content, beside the results in `.pitfall_lint_cache/`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pitfall_lint import __version__
from pitfall_lint.hashing import blake2b

FOLDER = ".pitfall_lint_cache"
# The format of a summary's row (project/summary.py): bump it when a field of FileSummary changes, and cached summaries
# of another format are computed afresh. Here, not beside the fields, so that a run whose files all keep their stamps
# never imports the summaries' code (a pre-commit run starts a process on every commit).
SUMMARY_FORMAT = 15
# The key of a fact kept beside the summaries, by the content key it follows: whether the file sets up distributed
# training, [True] or [False] (a question of every run that asks which modules DataParallel may run).
SETS_UP = ":sets-up"


def content_key(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def write_json_atomically(folder: Path, name: str, document: object) -> None:
    """The whole file or the old one, never half of one, in a folder that ignores itself in git."""
    folder.mkdir(exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Created by pitfall-lint: safe to delete.\n*\n")
    # A name of its own, as tempfile.mkstemp makes one, without the cost of importing tempfile in every run.
    temporary = folder / f".tmp-{os.urandom(8).hex()}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(document, separators=(",", ":")))  # dumps: json's C encoder, dump has none
        os.replace(temporary, folder / name)
    except BaseException:
        os.unlink(temporary)
        raise


def read_json_object(path: Path) -> dict[str, list]:
    """A JSON object written by write_json_atomically; empty where there is none yet, or an unreadable one (what it
    kept is worked out afresh)."""
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


class SummaryStore:
    """Summary rows by content key, and facts kept beside them (SETS_UP); `None` as the folder keeps them in memory
    only. The rows are kept in shards, one
    file per first two digits of the key, each read on its first use and written only when it gained a row: a run
    that needs a few summaries (one file changed) reads and writes a few shards, not the summaries of the whole
    project; a warm run whose results all hold reads none.

    Beside them, each file's stamp: its size and time of change when it was last read, with what was read then (its
    content key, facts of its bytes). While a file keeps its stamp, a run knows its key without reading it: the
    cost of a warm run, or of one file changed, no longer grows with the bytes of the whole project."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder
        tag = blake2b(f"{__version__}/{SUMMARY_FORMAT}".encode(), digest_size=8).hexdigest()
        self._prefix = f"summaries-{tag}-"
        self._stamps_name = f"stamps-{tag}.json"
        self._shards: dict[str, dict[str, list]] = {}
        self._dirty: set[str] = set()
        self._loaded_stamps: dict[str, list] | None = None if folder is not None else {}
        self._stamps_dirty = False

    def _read(self, name: str) -> dict[str, list]:
        return read_json_object(self._folder / name) if self._folder is not None else {}

    def _shard(self, key: str) -> tuple[str, dict[str, list]]:
        name = key[:2]
        if name not in self._shards:
            self._shards[name] = self._read(f"{self._prefix}{name}.json")
        return name, self._shards[name]

    @property
    def stamps(self) -> dict[str, list]:
        """[size, times of change in ns, content key, facts...] by absolute path (see the project model); the model
        adds to it through `stamp`."""
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
        return self._shard(key)[1].get(key)

    def put_all(self, rows: dict[str, list]) -> None:
        for key, row in rows.items():
            name, shard = self._shard(key)
            if key not in shard:
                shard[key] = row
                self._dirty.add(name)

    def save(self) -> None:
        if self._folder is not None:
            documents = [(f"{self._prefix}{name}.json", self._shards[name]) for name in sorted(self._dirty)]
            if self._stamps_dirty:
                documents.append((self._stamps_name, self.stamps))
            for name, document in documents:
                try:
                    write_json_atomically(self._folder, name, document)
                except OSError:
                    break  # a read-only checkout simply gets no cache
        self._dirty.clear()
        self._stamps_dirty = False
