"""`[tool.pitfall-lint]` from the nearest pyproject.toml, validated, over the one it extends, merged with the command
line."""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import sys
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

SECTION = "tool.pitfall-lint"
_LIST_KEYS = ("select", "extend-select", "ignore", "exclude", "extend-exclude")
_DATA_PARALLEL_KEY = "data-parallel"
# Which modules the DataParallel-only rules (PFL101-PFL106) look at: those nn.DataParallel can reach in the
# project ("auto"), every module ("always", for a library whose users wrap), or none ("never").
DATA_PARALLEL_MODES = ("auto", "always", "never")
_RESPECT_GITIGNORE_KEY = "respect-gitignore"
_PREVIEW_KEY = "preview"
_TARGET_KEY = "target-version"
_EXTEND_KEY = "extend"
# The oldest Python the project supports, as Ruff spells it; without it, `[project] requires-python` tells.
TARGET_VERSIONS = tuple(f"py3{minor}" for minor in range(7, 15))
_KNOWN_KEYS = (
    *_LIST_KEYS, "per-file-ignores", _DATA_PARALLEL_KEY, _RESPECT_GITIGNORE_KEY, _PREVIEW_KEY, _TARGET_KEY, _EXTEND_KEY
)
# One clause of a version specifier (PEP 440), such as `>=3.10` or `==3.11.*`.
_SPECIFIER = re.compile(r"\s*(?P<operator>~=|===|==|!=|<=|>=|<|>)\s*(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.\d+)*(?:\.\*)?\s*")


class ConfigError(Exception):
    """A one-line message that names the file and the key."""


@dataclass(frozen=True)
class TargetVersion:
    """The oldest Python the project supports, and the setting that says so."""

    version: tuple[int, int]
    source: str  # "target-version" or "requires-python"

    def __str__(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


def requires_python_floor(specifier: str) -> tuple[int, int] | None:
    """The lowest Python version (major, minor) a `requires-python` admits: `>=3.10` -> 3.10, `~=3.9` -> 3.9;
    None when it sets no lower bound or cannot be read."""
    floors = []
    for clause in specifier.split(","):
        match = _SPECIFIER.fullmatch(clause)
        if match is None:
            return None
        if match["operator"] in ("~=", "===", "==", ">=", ">"):
            floors.append((int(match["major"]), int(match["minor"] or 0)))
    return max(floors, default=None)


def _requires_python(document: dict) -> TargetVersion | None:
    project = document.get("project")
    specifier = project.get("requires-python") if isinstance(project, dict) else None
    floor = requires_python_floor(specifier) if isinstance(specifier, str) else None
    return TargetVersion(floor, "requires-python") if floor is not None else None


def _toml() -> ModuleType:
    """The TOML reader, imported where a file is read as TOML: a project whose pyproject.toml names neither our table
    nor `requires-python` (Lightning's, diffusers') is not parsed, and a pre-commit run saved the 5 ms of the import."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib


def _nearest_requires_python(start: Path) -> TargetVersion | None:
    """Of the nearest pyproject.toml: a project's metadata, not our configuration, so one that cannot be read
    tells nothing rather than stopping the run."""
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if os.path.isfile(candidate):
            try:
                text = candidate.read_text(encoding="utf-8")
                # A key is spelled in the text, quoted or not: without the word, the table cannot hold it.
                return _requires_python(_toml().loads(text)) if "requires-python" in text else None
            except (OSError, UnicodeDecodeError, _toml().TOMLDecodeError):
                return None
    return None


@dataclass(frozen=True)
class Config:
    root: Path
    source: Path | None = None
    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    data_parallel: str = "auto"
    respect_gitignore: bool = True  # skip what .gitignore, .ignore and .git/info/exclude leave out, as Ruff does
    preview: bool = False
    # The project's target Python, None when unknown: syntax newer than it is reported (PFL000).
    target: TargetVersion | None = None

    @cached_property
    def _resolved_root(self) -> Path:
        return self.root.resolve()

    def ignored_at(self, path: str) -> tuple[str, ...]:
        """The per-file-ignores of a path as given (relative to the current folder, or absolute): patterns match
        its path relative to the root, or its name."""
        if not self.per_file_ignores:
            return ()
        root = self._resolved_root
        absolute = Path(path).resolve()
        relative = absolute.relative_to(root).as_posix() if absolute.is_relative_to(root) else Path(path).as_posix()
        name = relative.rpartition("/")[2]
        return tuple(
            code
            for pattern, codes in self.per_file_ignores.items()
            # An absolute pattern is one of an extended configuration, anchored at its folder.
            if fnmatch.fnmatchcase(absolute.as_posix() if os.path.isabs(pattern) else relative, pattern)
            or fnmatch.fnmatchcase(name, pattern)
            for code in codes
        )


def _read_toml_text(path: Path) -> str:
    """The file's text; a one-line ConfigError when it cannot be read as UTF-8, TOML's only encoding."""
    if os.path.exists(path) and not os.path.isfile(path):
        raise ConfigError(f"{path}: cannot read: not a regular file")  # a named pipe would block forever
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        line = error.object[: error.start].count(b"\n") + 1
        raise ConfigError(f"{path}: cannot read: not UTF-8 ({error.reason} on line {line})") from None


def find_pyproject(start: Path) -> Path | None:
    """The closest pyproject.toml, from `start` upwards, that has a [tool.pitfall-lint] table.

    One that cannot be read is an error, not skipped: it may hold the table, and skipping it would drop
    the user's selection without a word.
    """
    for folder in [start, *start.parents]:
        candidate = _configuration_in(folder)
        if candidate is not None:
            return candidate
    return None


def _configuration_in(folder: Path) -> Path | None:
    """The folder's pyproject.toml when it has a [tool.pitfall-lint] table."""
    candidate = folder / "pyproject.toml"
    return candidate if os.path.isfile(candidate) and SECTION in _read_toml_text(candidate) else None


class ConfigResolver:
    """Each file's configuration, found as Ruff finds it in a monorepo: the nearest pyproject.toml with a
    [tool.pitfall-lint] table at or above the file's folder, else `fallback` (the run's own: `--config`, or the
    nearest to the current folder). With `fixed` (`--config`), `fallback` for every file. Found once per folder,
    each file read once: a run with one configuration pays a look at each folder's pyproject.toml."""

    def __init__(self, fallback: Config, known_codes: Sequence[str], fixed: bool = False) -> None:
        self.fallback = fallback
        self._known_codes = known_codes
        self._fixed = fixed
        self._by_folder: dict[str, Config] = {}
        self._by_given_folder: dict[str, Config] = {}  # by the folder of a path as given: a run asks once per folder
        self._by_file: dict[str, Config] = {}
        if fallback.source is not None:
            self._by_file[os.path.abspath(fallback.source)] = fallback

    def config_for(self, path: str | Path) -> Config:
        """The configuration of a file; raises ConfigError."""
        if self._fixed:
            return self.fallback
        folder = os.path.dirname(path)
        found = self._by_given_folder.get(folder)
        if found is None:
            found = self._by_given_folder[folder] = self.config_in(os.path.abspath(folder))
        return found

    def config_in(self, folder: str) -> Config:
        """The configuration of the files in this (absolute) folder; raises ConfigError."""
        if self._fixed:
            return self.fallback
        found = self._by_folder.get(folder)
        if found is None:
            candidate = _configuration_in(Path(folder))
            if candidate is not None:
                file = str(candidate)
                if file not in self._by_file:
                    self._by_file[file] = load_config(candidate, self._known_codes)
                found = self._by_file[file]
            else:
                parent = os.path.dirname(folder)
                found = self.fallback if parent == folder else self.config_in(parent)
            self._by_folder[folder] = found
        return found


def _strings(where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _boolean(table: dict[str, object], key: str, default: bool, path: Path) -> bool:
    """A true/false setting; anything else is a configuration error, never read as truthy."""
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: [{SECTION}] {key}: expected true or false, got {value!r}")
    return value


def load_config(path: Path | None, known_codes: Sequence[str]) -> Config:
    """The file's settings over those of the file its `extend` names (relative to it), and so on, as in Ruff;
    raises ConfigError, for a cycle of `extend` or a file it names that is missing too."""
    if path is None:
        return Config(root=Path.cwd(), target=_nearest_requires_python(Path.cwd()))
    return _load(path, known_codes, ())


def _load(path: Path, known_codes: Sequence[str], extended_by: tuple[Path, ...]) -> Config:
    """`extended_by`: the files (resolved) whose `extend` led here, the first one first."""
    toml = _toml()
    try:
        document = toml.loads(_read_toml_text(path))
    except toml.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    table = document.get("tool", {}).get("pitfall-lint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{SECTION}] must be a table")
    for key in table:
        if key not in _KNOWN_KEYS:
            raise ConfigError(f"{path}: [{SECTION}] unknown key '{key}' (known: {', '.join(_KNOWN_KEYS)})")
    values = {key: _strings(f"{path}: [{SECTION}] {key}", table[key]) for key in _LIST_KEYS if key in table}
    for key in ("select", "extend-select", "ignore"):
        check_codes(f"{path}: [{SECTION}] {key}", values.get(key, ()), known_codes)
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: [{SECTION}] per-file-ignores: expected a table of pattern = [codes]")
    per_file_ignores = {}
    for pattern, codes in per_file.items():
        where = f"{path}: [{SECTION}] per-file-ignores.{pattern}"
        per_file_ignores[pattern] = check_codes(where, _strings(where, codes), known_codes)
    data_parallel = table.get(_DATA_PARALLEL_KEY, "auto")
    if data_parallel not in DATA_PARALLEL_MODES:
        raise ConfigError(
            f"{path}: [{SECTION}] {_DATA_PARALLEL_KEY}: expected one of {', '.join(map(repr, DATA_PARALLEL_MODES))}, got {data_parallel!r}"
        )
    target = table.get(_TARGET_KEY)
    if target is not None and target not in TARGET_VERSIONS:
        raise ConfigError(
            f"{path}: [{SECTION}] {_TARGET_KEY}: expected one of {', '.join(map(repr, TARGET_VERSIONS))}, got {target!r}"
        )
    own = Config(
        root=path.parent,
        data_parallel=data_parallel,
        respect_gitignore=_boolean(table, _RESPECT_GITIGNORE_KEY, True, path),
        preview=_boolean(table, _PREVIEW_KEY, False, path),
        target=TargetVersion((3, int(target[3:])), _TARGET_KEY) if target is not None else _requires_python(document),
        source=path,
        select=values.get("select"),
        extend_select=values.get("extend-select", ()),
        ignore=values.get("ignore", ()),
        exclude=values.get("exclude", ()),
        extend_exclude=values.get("extend-exclude", ()),
        per_file_ignores=per_file_ignores,
    )
    if _EXTEND_KEY not in table:
        return own
    extended = table[_EXTEND_KEY]
    if not isinstance(extended, str) or not extended:
        raise ConfigError(f"{path}: [{SECTION}] {_EXTEND_KEY}: expected the path of a pyproject.toml, got {extended!r}")
    base = Path(os.path.normpath(path.parent / os.path.expanduser(extended)))
    chain = (*extended_by, path.resolve())
    if base.resolve() in chain:
        cycle = [*(str(file) for file in chain[chain.index(base.resolve()) :]), str(base.resolve())]
        raise ConfigError(f"{path}: [{SECTION}] {_EXTEND_KEY}: a cycle: {' -> '.join(cycle)}")
    if not os.path.isfile(base):
        raise ConfigError(f"{path}: [{SECTION}] {_EXTEND_KEY}: {base}: no such file")
    return _over(_load(base, known_codes, chain), own, table, known_codes)


def _over(base: Config, own: Config, keys: Collection[str], known_codes: Sequence[str]) -> Config:
    """`own` (the keys given of it) over `base`, as Ruff merges an extended configuration: a `select` starts the
    choice afresh, else the `extend-select` and `ignore` of both count (what `own` selects again no longer
    ignored); `extend-exclude` adds to the base's; any other key given replaces the base's. The base's patterns
    keep matching from its own folder."""
    if "select" in keys:
        select, extend_select, ignore = own.select, own.extend_select, own.ignore
    else:
        select = base.select
        extend_select = (*base.extend_select, *own.extend_select)
        ignore = (*_still_ignored(base.ignore, own.extend_select, known_codes), *own.ignore)
    if _TARGET_KEY in keys or (base.target is not None and base.target.source == _TARGET_KEY):
        target = own.target if _TARGET_KEY in keys else base.target
    else:  # neither sets target-version: this project's requires-python, else the base's
        target = own.target or base.target
    return replace(
        own,
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        exclude=own.exclude if "exclude" in keys else anchored(base.exclude, base.root),
        extend_exclude=(*anchored(base.extend_exclude, base.root), *own.extend_exclude),
        per_file_ignores=(
            own.per_file_ignores if "per-file-ignores" in keys
            else dict(zip(anchored(base.per_file_ignores, base.root), base.per_file_ignores.values()))
        ),
        data_parallel=own.data_parallel if _DATA_PARALLEL_KEY in keys else base.data_parallel,
        respect_gitignore=own.respect_gitignore if _RESPECT_GITIGNORE_KEY in keys else base.respect_gitignore,
        preview=own.preview if _PREVIEW_KEY in keys else base.preview,
        target=target,
    )


def _still_ignored(ignore: Iterable[str], selected_again: Sequence[str], known_codes: Sequence[str]) -> tuple[str, ...]:
    """The ignore selectors, less the codes selected again: a prefix with some of them becomes its other codes."""
    kept: list[str] = []
    for selector in ignore:
        codes = [code for code in known_codes if matches(code, (selector,))]
        if any(matches(code, selected_again) for code in codes):
            kept.extend(code for code in codes if not matches(code, selected_again))
        else:
            kept.append(selector)
    return tuple(kept)


def anchored(patterns: Iterable[str], root: Path) -> tuple[str, ...]:
    """Patterns with a slash made absolute at `root`, to match from any folder; a name matches anywhere as it is."""
    folder = glob.escape(os.path.abspath(root))
    return tuple(
        f"{folder}/{pattern.removeprefix('./')}" if "/" in pattern and not os.path.isabs(pattern) else pattern
        for pattern in patterns
    )


def check_codes(where: str, selectors: Iterable[str], known_codes: Sequence[str]) -> tuple[str, ...]:
    """Codes or prefixes (`PFL1`), or ALL; each must name at least one rule."""
    checked = []
    for selector in selectors:
        normal = selector.strip().upper()
        if not normal or (normal != "ALL" and not any(code.startswith(normal) for code in known_codes)):
            raise ConfigError(f"{where}: '{selector}' matches no rule code")
        checked.append(normal)
    return tuple(checked)


def matches(code: str, selectors: Iterable[str]) -> bool:
    return any(s == "ALL" or code.startswith(s) for s in selectors)
