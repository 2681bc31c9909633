"""The project around the file verify runs: its root, and the static findings in every one of its files, so that a
failure in `models/net.py` reached from `train.py` is matched to the finding it proves."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.engine import Engine
from pitfall_lint.files import Excluder, discover, display_path
from pitfall_lint.rules.base import Rule

_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_MAX_FILES = 3000


def project_root(script: str) -> tuple[Path, bool]:
    """The nearest folder upwards holding a pyproject.toml, setup.py, setup.cfg or .git (Ruff's way), and True;
    the script's own folder and False when there is none (then only the files beside the script are the project:
    a script in /tmp or in the home folder does not make all of it a project)."""
    folder = Path(os.path.realpath(script)).parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in _MARKERS):
            return candidate, True
    return folder, False


@dataclass(frozen=True)
class ProjectFindings:
    root: Path
    by_file: dict[str, list[Diagnostic]]  # real path -> findings
    paths: list[str]  # the files checked
    errors: dict[str, str]  # real path -> why it could not be checked

    def in_file(self, path: str) -> list[Diagnostic]:
        return self.by_file.get(os.path.realpath(path), [])


def check_project(root: Path, script: str, rules: list[type[Rule]], excluder: Excluder | None = None,
                  flat: bool = False) -> ProjectFindings:
    """Every Python file of the project through the static engine (the script's notebook or file included), with
    the configuration's exclusions; with `flat`, the files of the root folder only."""
    if flat:
        files = sorted(str(p) for p in root.glob("*.py") if not (excluder and excluder.excludes(p)))
    else:
        files = discover([str(root)], excluder or Excluder((), root))
    script_real = os.path.realpath(script)
    paths = [display_path(p) for p in files if p.endswith(".py")][:_MAX_FILES]
    if script_real not in {os.path.realpath(p) for p in paths}:
        paths.append(script)
    engine = Engine(rules)
    by_file: dict[str, list[Diagnostic]] = {}
    errors: dict[str, str] = {}
    for result in engine.check_files(paths):
        real = os.path.realpath(result.path)
        if result.internal_error:
            errors[real] = result.internal_error
            continue
        parse_errors = [d for d in result.diagnostics if d.code == "PFL000"]
        if parse_errors:
            errors[real] = parse_errors[0].message
        kept = [d for d in result.diagnostics if d.code != "PFL000"]
        if kept:
            by_file[real] = kept
    return ProjectFindings(root, by_file, paths, errors)
