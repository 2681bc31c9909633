"""The project around the file verify runs: its root, and the static findings in every one of its files, so that a
failure in `models/net.py` reached from `train.py` is matched to the finding it proves. The findings are those
`pitfall-lint check` gives: the same project model, root and exclusions."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from pitfall_lint.checking import ProjectSettings, check_paths
from pitfall_lint.diagnostic import ENGINE_CODES, Diagnostic
from pitfall_lint.files import discover, display_path
from pitfall_lint.project.layout import find_project_root
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.rules.registry import RuleSpec

_MAX_FILES = 3000


def project_root(script: str) -> tuple[Path, bool]:
    """The project root `check` finds (the nearest folder upwards with a marker), and True; the script's own folder
    and False when there is none (then only the files beside the script are the project: a script in /tmp or in the
    home folder does not make all of it a project)."""
    real = os.path.realpath(script)
    root = find_project_root(real)
    return (root, True) if root is not None else (Path(real).parent, False)


@dataclass(frozen=True)
class ProjectFindings:
    root: Path
    by_file: dict[str, list[Diagnostic]]  # real path -> findings
    paths: list[str]  # the files checked
    errors: dict[str, str]  # real path -> why it could not be checked
    model: ProjectModel | None = None  # what the project's files define and call, for the script's callers

    def in_file(self, path: str) -> list[Diagnostic]:
        return self.by_file.get(os.path.realpath(path), [])


def check_project(root: Path, script: str, rules: list[RuleSpec], settings: ProjectSettings,
                  flat: bool = False) -> ProjectFindings:
    """Every Python file of the project through the static checks (the script's notebook or file included), with
    the configuration's exclusions; with `flat`, the files of the root folder only."""
    excluder = settings.excluder
    if flat:
        files = sorted(str(p) for p in root.glob("*.py") if not excluder.excludes(p))
    else:
        files = discover([str(root)], excluder, lambda _: None)  # what cannot be read is not the script's failure
    script_real = os.path.realpath(script)
    paths = [display_path(p) for p in files if p.endswith(".py")][:_MAX_FILES]
    if script_real not in {os.path.realpath(p) for p in paths}:
        paths.append(script)
    # One root for all of them, the one found above (none for a flat folder: the files named are the project).
    run = check_paths(paths, rules, replace(settings, root=None if flat else root), root, use_cache=False)
    results = run.results
    by_file: dict[str, list[Diagnostic]] = {}
    errors: dict[str, str] = {}
    for result in results:
        real = os.path.realpath(result.path)
        if result.internal_error:
            errors[real] = result.internal_error
            continue
        parse_errors = [d for d in result.diagnostics if d.code == "PFL000"]
        if parse_errors:
            errors[real] = parse_errors[0].message
        # The engine's own codes: no run can confirm them.
        kept = [d for d in result.diagnostics if d.code not in ENGINE_CODES]
        if kept:
            by_file[real] = kept
    model = next((m for p, m in run.projects.items() if os.path.realpath(p) == script_real), None)
    return ProjectFindings(root, by_file, paths, errors, model)
