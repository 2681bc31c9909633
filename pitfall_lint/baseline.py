"""Baselines: adopt the linter on an old codebase by reporting only findings that are new.

An entry is matched by code, path and a fingerprint of the flagged source (its lines with the
indentation stripped), never by line number, so edits above a finding do not resurrect it.
Identical findings in one file are counted, so a second copy of a flagged line is new.
Paths are stored relative to the baseline file's folder, so the baseline holds from any working folder
(format 1 stored them relative to the working folder of the run that wrote it: read as such).
"""

from __future__ import annotations

import json
import linecache
import os
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.hashing import blake2b

FORMAT_VERSION = 2
_CWD_RELATIVE_VERSION = 1
_MAX_LINES = 5


class BaselineError(Exception):
    """A one-line reason the baseline file cannot be used."""


def fingerprint(diagnostic: Diagnostic) -> str:
    linecache.checkcache(diagnostic.path)  # the file may have changed since this process last read it
    last = min(diagnostic.end_line, diagnostic.line + _MAX_LINES - 1)
    text = "\n".join(linecache.getline(diagnostic.path, n).strip() for n in range(diagnostic.line, last + 1))
    return blake2b(f"{diagnostic.code}\n{text}".encode(), digest_size=12).hexdigest()


def _stored_path(path: str, folder: str | None) -> str:
    """`folder`: the one paths are relative to; None for the working folder (format 1)."""
    return Path(path if folder is None else os.path.relpath(os.path.abspath(path), folder)).as_posix()


def _key(diagnostic: Diagnostic, folder: str | None) -> tuple[str, str, str]:
    return diagnostic.code, _stored_path(diagnostic.path, folder), fingerprint(diagnostic)


def _folder(baseline: Path) -> str:
    return os.path.dirname(os.path.abspath(baseline))


def write(path: Path, diagnostics: list[Diagnostic]) -> None:
    folder = _folder(path)
    entries = [
        {"code": code, "path": file, "fingerprint": print_, "line": d.line}
        for d in diagnostics
        for code, file, print_ in [_key(d, folder)]
    ]
    path.write_text(json.dumps({"version": FORMAT_VERSION, "tool": "pitfall-lint", "findings": entries}, indent=2) + "\n")


class Comparison(NamedTuple):
    fresh: list[Diagnostic]  # not in the baseline: the findings to report
    # Entries no finding matched, of a file checked and a code reported there: fixed, or changed into a new
    # finding. Left in the baseline, one would hide the next finding of that line that someone writes.
    stale: int


def compare(
    path: Path, diagnostics: list[Diagnostic], checked: Iterable[str], reported: Callable[[str, str], bool]
) -> Comparison:
    """`checked`: the files of the run, as given; `reported(file, code)`: whether the run reports the code there. An
    entry of another file, or of a code not reported there (a rule not selected), may still hold: it is not stale."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        version = document["version"]
        known = Counter((e["code"], e["path"], e["fingerprint"]) for e in document["findings"])
    except OSError as error:
        raise BaselineError(f"{path}: cannot read the baseline: {error.strerror or error}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise BaselineError(f"{path}: not a pitfall-lint baseline ({type(error).__name__}: {error})") from None
    if version not in (FORMAT_VERSION, _CWD_RELATIVE_VERSION):
        raise BaselineError(f"{path}: baseline format {version!r} is not one this version reads (1 or 2): write it again")
    folder = _folder(path) if version == FORMAT_VERSION else None
    fresh = []
    for diagnostic in diagnostics:
        key = _key(diagnostic, folder)
        if known[key] > 0:
            known[key] -= 1
        else:
            fresh.append(diagnostic)
    files = {_stored_path(file, folder): file for file in checked}
    stale = sum(count for (code, file, _), count in known.items() if file in files and reported(files[file], code))
    return Comparison(fresh, stale)
