"""What git ignores, for the folder walk, as Ruff's `respect-gitignore` decides it: `.gitignore` and `.ignore` files
and the repository's `.git/info/exclude`, matched by pathspec's implementation of git's patterns.

pathspec is imported only when a walk meets a file that holds a pattern: a run on the files named, with no ignore
file around them, does without it.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pitfall_lint.hashing import blake2b
from pitfall_lint.project.store import read_json_object, write_json_atomically

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

GIT = ".git"
GITIGNORE = ".gitignore"
# ripgrep's and Ruff's file of patterns for tools, not git: it overrides a .gitignore, whatever their depths.
IGNORE = ".ignore"
_GROUP_NAME = re.compile(r"\(\?P<\w+>")  # `(?P<ps_d>` in the expressions pathspec writes
_IN_ANY_FOLDER = "^(?:.+/)?"


@dataclass(frozen=True)
class _Patterns:
    """One file's patterns, as they apply in a folder at or below the file's."""

    lines: tuple[str, ...]
    # Every pattern in one expression: a path none matches (most paths) is told so by one search, where pathspec tries
    # each pattern in turn (two thirds of a warm run of Lightning went there). None: the file holds no pattern.
    joined: re.Pattern[str] | None
    takes_back: bool  # some pattern takes a path back (`!`): the last match decides, which pathspec tells
    where: str = ""  # that folder, relative to the file's, with a trailing slash ("" in the file's own folder)

    @classmethod
    def of(cls, lines: tuple[str, ...]) -> _Patterns:
        """The patterns' expressions compiled once in the joined one (pathspec's own spec, which compiles each of
        them, is built only for a file that takes paths back)."""
        joined, takes_back = TRANSLATIONS.joined(lines)
        return cls(lines, re.compile(joined) if joined is not None else None, takes_back)

    def below(self, name: str) -> _Patterns:
        return _Patterns(self.lines, self.joined, self.takes_back, f"{self.where}{name}/")

    def verdict(self, name: str, is_folder: bool) -> bool | None:
        """True: ignored; False: taken back by a `!` pattern; None: no pattern matches. Git's last match decides."""
        path = f"{self.where}{name}/" if is_folder else f"{self.where}{name}"
        if self.joined is None or not self.joined.search(path):
            return None
        return _spec(self.lines).check_file(path).include if self.takes_back else True


def _joined_expression(lines: tuple[str, ...]) -> tuple[str | None, bool]:
    """Each pattern's expression as pathspec writes it, in one (None: no pattern), and whether some pattern takes
    paths back."""
    to_regex = _pattern_type().pattern_to_regex
    patterns = [(regex, include) for regex, include in map(to_regex, filter(None, lines)) if include is not None and regex is not None]
    # Each expression names its group alike: unnamed, they can stand side by side. Most match in any folder
    # (`^(?:.+/)?name`): that start written once lets one try of each folder of the path serve them all.
    anywhere, others = [], []
    for regex, _ in patterns:
        body = _GROUP_NAME.sub("(?:", regex)
        if body.startswith(_IN_ANY_FOLDER):
            anywhere.append(f"(?:{body.removeprefix(_IN_ANY_FOLDER)})")
        else:
            others.append(f"(?:{body})")
    if anywhere:
        others.append(f"{_IN_ANY_FOLDER}(?:{'|'.join(anywhere)})")
    return ("|".join(others) if patterns else None), any(not include for _, include in patterns)


class _Translations:
    """Each ignore file's joined expression by the file's lines, kept in the cache folder from one run to the next:
    importing pathspec, which translates the patterns, took longer than reading, translating and matching them (11 ms
    of a pre-commit run on diffusers, whose .gitignore holds 188 lines). Kept apart for each install of pathspec (its
    files' place and time of change), so that another version of it translates them afresh."""

    def __init__(self) -> None:
        self._folder: Path | None = None
        self._known: dict[str, list] | None = None

    def keep_in(self, folder: Path | None) -> None:
        """Keep them in this cache folder; None: translate afresh in every run (--no-cache)."""
        self._folder, self._known = folder, None

    def joined(self, lines: tuple[str, ...]) -> tuple[str | None, bool]:
        name = _translations_file() if self._folder is not None else None
        if self._folder is None or name is None:
            return _joined_expression(lines)
        if self._known is None:
            self._known = read_json_object(self._folder / name)  # none yet, or unreadable: translated afresh
        key = blake2b("\n".join(lines).encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
        found = self._known.get(key)
        if isinstance(found, list) and len(found) == 2 and isinstance(found[0], (str, type(None))) and isinstance(found[1], bool):
            return found[0], found[1]
        joined, takes_back = _joined_expression(lines)
        self._known[key] = [joined, takes_back]
        try:
            write_json_atomically(self._folder, name, self._known)
        except OSError:
            pass  # a read-only checkout translates them in every run
        return joined, takes_back


@functools.cache
def _translations_file() -> str | None:
    """Named after the install of pathspec; None where it cannot be found without importing it."""
    spec = importlib.machinery.PathFinder.find_spec("pathspec")
    if spec is None or spec.origin is None:
        return None
    try:
        changed = os.stat(spec.origin).st_mtime_ns
    except OSError:
        return None
    tag = blake2b(f"{spec.origin}\0{changed}".encode(), digest_size=8).hexdigest()
    return f"ignore-patterns-{tag}.json"


TRANSLATIONS = _Translations()


def _pattern_type() -> type:
    """The pattern class of pathspec's GitIgnoreSpec: GitIgnoreSpecPattern from pathspec 1, GitWildMatchPattern
    before."""
    try:
        from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern
    except ImportError:
        from pathspec.patterns.gitwildmatch import GitWildMatchPattern

        return GitWildMatchPattern
    return GitIgnoreSpecPattern


@functools.cache
def _spec(lines: tuple[str, ...]) -> GitIgnoreSpec:
    from pathspec import GitIgnoreSpec

    return GitIgnoreSpec.from_lines(lines)


def _read(path: str) -> _Patterns | None:
    """None when the file holds no pattern (the exclude file of `git init` holds comments only) or cannot be read
    (git goes on without it too); a named pipe is never read."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8-sig", errors="surrogateescape") as handle:  # git skips a BOM too
            lines = handle.read().splitlines()
    except OSError:
        return None
    if not any(line.strip() and not line.startswith("#") for line in lines):
        return None
    return _Patterns.of(tuple(lines))


@dataclass(frozen=True)
class IgnoreRules:
    """The patterns in force in one folder of a walk, each kind deepest first, as git reads them: a deeper file's
    patterns override a shallower one's, and every .gitignore overrides the repository's exclude file."""

    ignore_files: tuple[_Patterns, ...] = ()
    gitignore_files: tuple[_Patterns, ...] = ()
    exclude_file: tuple[_Patterns, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ignore_files or self.gitignore_files or self.exclude_file)

    def ignores(self, name: str, is_folder: bool) -> bool:
        """Of a file or folder in the folder these rules are for."""
        for patterns in (*self.ignore_files, *self.gitignore_files, *self.exclude_file):
            verdict = patterns.verdict(name, is_folder)
            if verdict is not None:
                return verdict
        return False

    def inside(self, folder: str, names: Collection[str]) -> IgnoreRules:
        """The rules of `folder`, a folder in the one these rules are for, given the names it holds: its own files
        first. A repository of its own (a submodule, a clone) starts afresh, as git reads it; `.ignore` files go on."""
        name = os.path.basename(folder)
        ignore_files = tuple(patterns.below(name) for patterns in self.ignore_files)
        gitignore_files = tuple(patterns.below(name) for patterns in self.gitignore_files)
        exclude_file = tuple(patterns.below(name) for patterns in self.exclude_file)
        if GIT in names:
            gitignore_files, exclude_file = (), _optional(_read(os.path.join(folder, GIT, "info", "exclude")))
        if IGNORE in names:
            ignore_files = (*_optional(_read(os.path.join(folder, IGNORE))), *ignore_files)
        if GITIGNORE in names:
            gitignore_files = (*_optional(_read(os.path.join(folder, GITIGNORE))), *gitignore_files)
        return IgnoreRules(ignore_files, gitignore_files, exclude_file)


def _optional(patterns: _Patterns | None) -> tuple[_Patterns, ...]:
    return () if patterns is None else (patterns,)


def _names_in(folder: str) -> list[str]:
    """Which of the names the rules look for the folder holds (a `.git` file too: a worktree, a submodule)."""
    return [name for name in (GIT, IGNORE, GITIGNORE) if os.path.lexists(os.path.join(folder, name))]


class GitIgnore:
    """What git ignores around the paths of one run, each folder above them read once (pre-commit names many files
    of a few folders)."""

    def __init__(self) -> None:
        self._folders: dict[str, tuple[IgnoreRules, bool] | None] = {}

    def rules_in(self, folder: str) -> tuple[IgnoreRules, bool] | None:
        """The rules in force in `folder` (absolute), its own files included, read from the root of its git
        repository down, and whether they ignore it or a folder above it; None outside a repository, where only
        the folders walked count."""
        if folder not in self._folders:
            parent = os.path.dirname(folder)
            above = self.rules_in(parent) if parent != folder else None
            names = _names_in(folder)
            if above is None and GIT not in names:
                self._folders[folder] = None
            else:
                rules, ignored = above or (IgnoreRules(), False)
                # A repository of its own is read as git reads it, whatever the one around it ignores.
                ignored = GIT not in names and (ignored or rules.ignores(os.path.basename(folder), True))
                self._folders[folder] = (rules.inside(folder, names), ignored)
        return self._folders[folder]

    def ignores(self, path: str | os.PathLike[str]) -> bool:
        """Whether git ignores the path or a folder above it (never outside a repository)."""
        absolute = os.path.abspath(path)
        parent, name = os.path.split(absolute)
        around = self.rules_in(parent)
        return around is not None and (around[1] or around[0].ignores(name, os.path.isdir(absolute)))

    def rules_above(self, folder: str) -> IgnoreRules:
        """The rules a walk of `folder` starts from. A folder ignored is walked when named, as a named file is
        checked: the ignore files below it still count."""
        around = self.rules_in(os.path.dirname(os.path.abspath(folder)))
        return around[0] if around is not None and not self.ignores(folder) else IgnoreRules()
