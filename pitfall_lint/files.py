"""Which files to check: explicit files, folders walked recursively, and what is left out."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

PYTHON_SUFFIXES = (".py", ".ipynb")
# Never ours to check: version control, virtual environments, caches and build output.
DEFAULT_EXCLUDED_DIRECTORIES = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".pitfall_lint_cache", ".ipynb_checkpoints",
        "build", "dist", "site-packages", "node_modules", "_build", "buck-out", "__pypackages__",
    }
)


class MissingPathError(Exception):
    pass


class Excluder:
    """Glob patterns matched, as in ruff, against a path's name or its path relative to the root."""

    def __init__(self, patterns: Iterable[str], root: Path) -> None:
        self._patterns = tuple(p.rstrip("/") for p in patterns)
        self._root = os.path.abspath(root)

    def excludes(self, path: Path) -> bool:
        if not self._patterns:
            return False
        # abspath, not resolve: links are matched where they stand, and a link loop cannot raise.
        absolute = os.path.abspath(path)
        inside = absolute.startswith(self._root + os.sep)
        relative = Path(os.path.relpath(absolute, self._root)).as_posix() if inside else path.as_posix()
        return any(fnmatch.fnmatchcase(path.name, p) or fnmatch.fnmatchcase(relative, p) for p in self._patterns)


def _is_virtual_environment(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, "pyvenv.cfg"))


def _walk(folder: Path, excluder: Excluder) -> Iterator[Path]:
    for directory, subdirectories, filenames in os.walk(folder):
        kept = []
        for name in sorted(subdirectories):
            child = os.path.join(directory, name)
            if name in DEFAULT_EXCLUDED_DIRECTORIES or name.endswith(".egg-info") or _is_virtual_environment(child):
                continue
            if not excluder.excludes(Path(child)):
                kept.append(name)
        subdirectories[:] = kept
        for name in sorted(filenames):
            path = Path(directory, name)
            if name.endswith(PYTHON_SUFFIXES) and not excluder.excludes(path):
                yield path


def discover(paths: Sequence[str], excluder: Excluder, force_exclude: bool = False) -> list[str]:
    """Files to check, in a stable order. Named files are checked even when excluded, unless forced."""
    found: dict[str, None] = {}
    for raw in paths:
        path = Path(raw)
        if not os.path.lexists(path):
            raise MissingPathError(f"{raw}: no such file or directory")
        if force_exclude and excluder.excludes(path):
            continue
        if path.is_dir():
            found.update((str(p), None) for p in _walk(path, excluder))
        else:
            found[str(path)] = None  # even a broken link: reading it reports why it cannot be checked
    return list(found)


def display_path(path: str) -> str:
    """Relative to the working directory when inside it, as ruff prints paths."""
    absolute = os.path.abspath(path)
    cwd = os.getcwd()
    return os.path.relpath(absolute, cwd) if absolute.startswith(cwd + os.sep) else path
