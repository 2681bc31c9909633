"""Which files to check: explicit files, folders walked recursively, and what is left out."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from pitfall_lint.ignore_files import GitIgnore

PYTHON_SUFFIXES = (".py", ".ipynb")
# A file named on the command line is Python with one of these, or a python shebang (pre-commit tags both `python`).
NAMED_PYTHON_SUFFIXES = (*PYTHON_SUFFIXES, ".pyi", ".pyw")
# `#!/usr/bin/env python3`, `#!/usr/bin/python3.11 -u`, `#! python`, `#!/usr/bin/env -S pypy3`: the first line only.
_PYTHON_SHEBANG = re.compile(rb"#!(?:[^\n]*[\s/])?(?:python|pypy)[0-9.]*(?:\s|$)")
_SHEBANG_LENGTH = 4096
# Where launch commands are written (read by project/launches.py): shell scripts, Makefiles, the documentation.
_LAUNCH_DOCUMENT_SUFFIXES = (".sh", ".bash", ".mk", ".md", ".rst")
_LAUNCH_DOCUMENT_NAMES = frozenset({"Makefile", "makefile", "GNUmakefile"})
# Never ours to check: version control, virtual environments, caches and build output.
DEFAULT_EXCLUDED_DIRECTORIES = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".pitfall_lint_cache", ".ipynb_checkpoints",
        "build", "dist", "site-packages", "node_modules", "_build", "buck-out", "__pypackages__",
    }
)
_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)

Warn = Callable[[str], None]


class MissingPathError(Exception):
    """None of the paths named exists: nothing to check."""


class Excluder:
    """Glob patterns as in Ruff: one without a slash matches the name of a file or folder at any depth
    (`generated` leaves out every folder of that name and all below it); one with a slash matches the
    path relative to the root, the configuration's folder. And, unless told not to, what git ignores."""

    def __init__(self, patterns: Iterable[str], root: Path, respect_gitignore: bool = True) -> None:
        self.git = GitIgnore() if respect_gitignore else None
        # Each folder walked with these exclusions (see `walk`), by its absolute path.
        self._walks: dict[str, tuple[str, list[str], list[str]]] = {}
        names: list[str] = []
        paths: list[str] = []
        absolute: list[str] = []  # those of an extended configuration, anchored at its folder
        for raw in patterns:
            pattern = raw.rstrip("/").removeprefix("./")
            # `**/x` also matches `x` at the top, as in Ruff's globs.
            if pattern.startswith("**/"):
                variants = (pattern, pattern[3:])
            elif os.path.isabs(pattern) and "/**/" in pattern:
                variants = (pattern, pattern.replace("/**/", "/", 1))
            else:
                variants = (pattern,)
            for variant in variants:
                (absolute if os.path.isabs(variant) else paths if "/" in variant else names).append(variant)
        self._names = tuple(names)
        self._paths = tuple(paths)
        self._absolute = tuple(absolute)
        self.root = os.path.abspath(root)

    def matches(self, path: Path | str) -> bool:
        """Whether this file or folder itself is excluded, as a walk meets it."""
        if not (self._names or self._paths or self._absolute):
            return False
        # abspath, not resolve: links are matched where they stand, and a link loop cannot raise.
        absolute = os.path.abspath(path)
        name = os.path.basename(absolute)
        if any(fnmatch.fnmatchcase(name, p) for p in self._names):
            return True
        if any(fnmatch.fnmatchcase(absolute, p) for p in self._absolute):
            return True
        if not self._paths or not absolute.startswith(self.root + os.sep):
            return False
        relative = absolute[len(self.root) + 1 :].replace(os.sep, "/")  # a cut: os.path.relpath cost a walk a tenth
        return any(fnmatch.fnmatchcase(relative, p) for p in self._paths)

    def walk(self, folder: str, warn: Warn) -> tuple[list[str], list[str]]:
        """The Python files under the folder and the launch documents among its files (project/launches.py), spelled
        from the folder as named. A folder is walked once per run: the command line's walk of a project's root
        serves the project model's."""
        absolute = os.path.abspath(folder)
        prefix = _prefix(folder)
        if absolute not in self._walks:
            documents: list[str] = []
            self._walks[absolute] = (prefix, list(_walk(folder, self, warn, documents)), documents)
        walked_as, files, documents = self._walks[absolute]
        if walked_as == prefix:
            return files, documents
        return [prefix + path[len(walked_as) :] for path in files], [prefix + path[len(walked_as) :] for path in documents]

    def in_folder(self, folder: str) -> Excluder:
        """What matches the entries of this folder (as a walk spells it): asked once per folder, not per entry."""
        return self

    def excludes(self, path: Path | str) -> bool:
        """Whether the path or a folder above it (up to the root) is excluded or ignored by git: Ruff's test of a
        named path under --force-exclude, so that a staged `third_party/x.py` is left out by `third_party`."""
        return self._matches_above(path) or (self.git is not None and self.git.ignores(path))

    def _matches_above(self, path: Path | str) -> bool:
        if not (self._names or self._paths or self._absolute):
            return False
        current = os.path.abspath(path)
        while current != self.root:
            if self.matches(current):
                return True
            parent = os.path.dirname(current)
            if parent == current:
                return False
            current = parent
        return False


class FolderExcluder(Excluder):
    """The exclusions of each folder's own configuration, as Ruff applies a monorepo's: what a walk meets in a folder
    is matched by the excluder of that folder (`excluder_in`, given an absolute folder); what git ignores, once for
    all."""

    def __init__(self, excluder_in: Callable[[str], Excluder], respect_gitignore: bool = True) -> None:
        super().__init__((), Path("/"), respect_gitignore)
        self._excluder_in = excluder_in
        self._in_folder: dict[str, Excluder] = {}

    def matches(self, path: Path | str) -> bool:
        return self.in_folder(os.path.dirname(path)).matches(path)

    def in_folder(self, folder: str) -> Excluder:
        excluder = self._in_folder.get(folder)  # as given: a walk's entries share their folder's spelling
        if excluder is None:
            excluder = self._in_folder[folder] = self._excluder_in(os.path.abspath(folder))
        return excluder

    def _matches_above(self, path: Path | str) -> bool:
        """The path or a folder above it, each matched by its parent folder's excluder up to that one's root."""
        current = os.path.abspath(path)
        parent = os.path.dirname(current)
        while parent != current:
            excluder = self._excluder_in(parent)
            if current.startswith(excluder.root + os.sep) and excluder.matches(current):
                return True
            current, parent = parent, os.path.dirname(parent)
        return False


def _is_virtual_environment(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, "pyvenv.cfg"))


def special_kind(path: str) -> str | None:
    """What a path that is not a regular file is (reading a named pipe would block forever); None for a
    regular file or one that cannot be looked at (reading it reports why)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return next((kind for test, kind in _SPECIAL_FILES if test(mode)), None)


def _keep(path: str, warn: Warn) -> bool:
    kind = special_kind(path)
    if kind is not None:
        warn(f"{Path(path)}: not a regular file ({kind}), skipped")
    return kind is None


def _is_python(path: str) -> bool:
    """A named file's suffix, else its first line; one that cannot be read is kept, and reading it reports why."""
    if path.endswith(NAMED_PYTHON_SUFFIXES):
        return True
    try:
        with open(path, "rb") as handle:
            first_line = handle.readline(_SHEBANG_LENGTH)
    except OSError:
        return True
    return _PYTHON_SHEBANG.match(first_line) is not None


def is_launch_document(name: str) -> bool:
    """Whether a file of this name can hold commands that launch the project's scripts."""
    return name.endswith(_LAUNCH_DOCUMENT_SUFFIXES) or name in _LAUNCH_DOCUMENT_NAMES


def _prefix(folder: str) -> str:
    """What the paths of a folder's files start with: `./a.py` and `a.py` are one file, and the folder's spelling is
    normalised once, not each of its files' (Path)."""
    spelled = str(Path(folder))
    return "" if spelled == "." else spelled.rstrip(os.sep) + os.sep


def _walk(folder: str, excluder: Excluder, warn: Warn, documents: list[str]) -> Iterator[str]:
    """The Python files under the folder; `documents` gets the launch documents the walk meets (see
    project/launches.py)."""
    # A folder's files are spelled from its own spelling: `prefix` is worked out once, for the folder named.
    pending = [(folder, _prefix(folder), excluder.git.rules_above(folder) if excluder.git is not None else None)]
    while pending:
        directory, prefix, above = pending.pop()
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError as error:
            warn(f"{Path(directory)}: cannot read the folder ({error.strerror or error}), skipped")
            continue
        rules = above.inside(os.path.abspath(directory), {entry.name for entry in entries}) if above is not None else None
        excluded = excluder.in_folder(directory)
        subdirectories = []
        for entry in entries:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                if name in DEFAULT_EXCLUDED_DIRECTORIES or name.endswith(".egg-info") or _is_virtual_environment(entry.path):
                    continue
                if not excluded.matches(entry.path) and not (rules and rules.ignores(name, True)):
                    subdirectories.append((entry.path, f"{prefix}{name}{os.sep}", rules))
            elif name.endswith(PYTHON_SUFFIXES) and not excluded.matches(entry.path) and not (rules and rules.ignores(name, False)):
                try:
                    regular = entry.is_file()
                    linked_folder = not regular and entry.is_dir()
                except OSError:  # a link loop: reading it reports why it cannot be checked
                    regular, linked_folder = True, False
                # A link to a folder is not followed, as in os.walk; a broken link is kept, as a loop is.
                if not linked_folder and (regular or _keep(entry.path, warn)):
                    yield prefix + name
            elif is_launch_document(name) and not excluded.matches(entry.path) and entry.is_file():
                # Read, never checked: git is not asked about a document in a folder it keeps (asking it for each
                # document made the walk a third slower on diffusers).
                documents.append(prefix + name)
        pending.extend(reversed(subdirectories))  # depth first, in name order


def existing_paths(paths: Sequence[str], warn: Warn) -> list[str]:
    """The paths named that exist. A missing one is a warning while another is left to check, as in Ruff (the run
    still exits 2); when none is left, MissingPathError."""
    existing = [path for path in paths if os.path.lexists(path)]  # a broken link exists: reading it says why not
    missing = [path for path in paths if not os.path.lexists(path)]
    if not existing:
        raise MissingPathError(f"{', '.join(missing)}: no such file or directory")
    for path in missing:
        warn(f"{path}: no such file or directory, skipped")
    return existing


def discover(
    paths: Sequence[str], excluder: Excluder, warn: Warn, force_exclude: bool = False, documents: list[str] | None = None
) -> list[str]:
    """Files to check, in a stable order. Named files are checked even when excluded, unless forced.
    What is not a regular file (a named pipe, a device) or not Python is skipped with a warning. `documents` gets
    the launch documents under the folders named (see Excluder.walk)."""
    found: dict[str, None] = {}
    for raw in paths:
        if force_exclude and excluder.excludes(raw):
            continue
        if os.path.isdir(raw):
            files, launch_documents = excluder.walk(raw, warn)
            found.update(dict.fromkeys(files))
            if documents is not None:
                documents += launch_documents
        elif not _keep(raw, warn):
            continue
        elif _is_python(raw):
            found[str(Path(raw))] = None  # even a broken link: reading it reports why it cannot be checked
        else:
            warn(f"{Path(raw)}: not a Python file, skipped")
    return list(found)


def display_path(path: str) -> str:
    """Relative to the working directory when inside it, as ruff prints paths."""
    if not os.path.isabs(path):
        # What a walk of the working directory yields: the path itself, normalised (abspath and relpath took 4 ms over
        # Lightning's 646 files, for the same answer).
        normalised = os.path.normpath(path)
        if normalised != os.curdir and normalised != os.pardir and not normalised.startswith(os.pardir + os.sep):
            return normalised
    absolute = os.path.abspath(path)
    cwd = os.getcwd()
    return os.path.relpath(absolute, cwd) if absolute.startswith(cwd + os.sep) else path
