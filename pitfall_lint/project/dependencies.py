"""The versions of a framework that a project declares: read from its dependency files, once per project.

What a framework's call does can change between its versions (Lightning's `Trainer.save_checkpoint` waits at a
barrier since 2.1.0, not before), so a rule that depends on it asks which versions the project admits. The files
read are those at the project's root that pin dependencies: requirements*.txt (and the .txt files of a
requirements/ folder, one level down), setup.py, setup.cfg, pyproject.toml (PEP 621 and Poetry) and conda's
environment*.yml. A distribution's name followed by a specifier is a declaration of it, in whatever syntax these
files give it: `pytorch-lightning==1.5.10`, `"lightning>=2.1,<3"`, `lightning = "^2.2"`, `- pytorch-lightning=1.6`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

_MANIFEST = re.compile(r"requirements.*\.txt|setup\.py|setup\.cfg|pyproject\.toml|environment.*\.ya?ml", re.IGNORECASE)
_REQUIREMENTS_FOLDER = "requirements"
_MAX_BYTES = 1 << 20  # a dependency file is small; a large file of that name is something else, and is not read
_COMMENT = re.compile(r"(?m)(?:^|\s)#.*$")
# After the name: extras, then a Poetry value (`= "^2.1"`, `= {version = "^2.1", ...}`) or specifier clauses.
_AFTER_NAME = (
    r"\s*(?:\[[^\]\n]*\])?"
    r"(?:\s*=\s*(?:\{[^}\n]*?\bversion\s*=\s*)?[\"'](?P<quoted>[^\"'\n]*)[\"']"
    r"|(?P<clauses>(?:\s*(?:~=|===|==|!=|<=|>=|<|>|=)\s*[0-9][\w.*+!-]*\s*,?)+))"
)
_CLAUSE = re.compile(r"\s*(?P<operator>~=|===|==|!=|<=|>=|<|>|=|\^|~)?\s*(?P<version>[0-9][\w.*+!-]*)\s*")
# The operators that set a lowest version: `>=2.1`, `==1.5.10`, `~=1.6`, Poetry's `^2.1` / `~2.1`, conda's `=1.6`.
_FLOOR_OPERATORS = frozenset({"~=", "===", "==", ">=", ">", "=", "^", "~", None})
Version = tuple[int, ...]


def manifests(root: str) -> list[str]:
    """The dependency files of the project at `root`, in a stable order (read_manifest skips what is no file)."""
    found = [os.path.join(root, name) for name in _listing(root) if _MANIFEST.fullmatch(name)]
    requirements = os.path.join(root, _REQUIREMENTS_FOLDER)
    for name in _listing(requirements):
        if name.endswith(".txt"):
            found.append(os.path.join(requirements, name))
        else:
            found += [os.path.join(requirements, name, inner) for inner in _listing(os.path.join(requirements, name)) if inner.endswith(".txt")]
    return found


def _listing(folder: str) -> list[str]:
    """The names in a folder, sorted; none when it is no folder or cannot be read."""
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def read_manifest(path: str) -> str:
    """Its text, comments left out; empty when it cannot be read or is too large to be one."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > _MAX_BYTES:
            return ""
        with open(path, encoding="utf-8", errors="replace") as handle:
            return _COMMENT.sub("", handle.read())
    except OSError:
        return ""


def version_of(text: str) -> Version | None:
    """The numeric release of a version (`2.1.0rc1` -> (2, 1, 0), `2.*` -> (2,)); None when it starts with none."""
    parts = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
        if digits.end() < len(part):
            break  # `0rc1`: the release ends here
    return tuple(parts) or None


def _floor(specifier: str) -> Version | None:
    """The lowest version one declaration admits, None when it sets no lower bound (`<2`, `!=1.5`, `*`)."""
    floors = []
    for clause in specifier.split(","):
        match = _CLAUSE.fullmatch(clause)
        if match is not None and match["operator"] in _FLOOR_OPERATORS:
            version = version_of(match["version"])
            if version is not None:
                floors.append(version)
    return max(floors, default=None)


def declared_floor(texts: Iterable[str], distribution: str) -> Version | None:
    """The lowest version of the distribution that the declarations in `texts` admit (the lowest of their lower
    bounds: any of these files may be the one a user installs from); None when none declares a lower bound."""
    name = r"[-_.]".join(re.escape(part) for part in re.split(r"[-_.]", distribution))
    declaration = re.compile(rf"(?<![\w.-]){name}(?![\w.-]){_AFTER_NAME}", re.IGNORECASE)
    floors = []
    for text in texts:
        for match in declaration.finditer(text):
            floor = _floor(match["quoted"] if match["quoted"] is not None else match["clauses"])
            if floor is not None:
                floors.append(floor)
    return min(floors, default=None)
