"""The rules as a flake8 plugin: `flake8` reports what `pitfall-lint check` reports with the same configuration.

The rules run are chosen as `check` chooses them: `[tool.pitfall-lint]` of the nearest pyproject.toml (select,
extend-select, ignore, per-file-ignores, and preview, the only way to run preview rules here), then flake8's own
`--select` / `--extend-select` where they name PFL codes, which can turn on a rule that is off by default. flake8
still filters what it shows.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from collections.abc import Iterator, Sequence
from typing import Any

from pitfall_lint import __version__
from pitfall_lint.checking import ProjectSettings, project_model, project_root
from pitfall_lint.config import Config, ConfigError, matches
from pitfall_lint.engine import Engine
from pitfall_lint.files import Excluder
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.project.store import SummaryStore
from pitfall_lint.selection import known_codes, nearest_config, selected_rules


def _ours(selectors: Sequence[str] | None) -> list[str]:
    """The selectors that choose at least one of our codes (`PFL2`, `P`); flake8 passes every plugin's."""
    codes = known_codes()
    return [s for s in selectors or () if s and any(code.startswith(s) for code in codes)]


class Flake8Plugin:
    name = "pitfall-lint"
    version = __version__
    _config: Config | None = None
    _engine: Engine | None = None
    _left_out: tuple[str, ...] = ()  # the engine's own codes the selection leaves out
    # One model per project root, as `check` sees the project: every file is checked against its project.
    _projects: dict[Path | None, ProjectModel] = {}

    def __init__(self, tree: ast.AST, filename: str, lines: list[str]) -> None:
        self._filename = filename
        self._lines = lines

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        """Called by flake8 once its options are parsed (and again in each worker process it spawns)."""
        try:
            config = nearest_config(None)
            # flake8's --select, given at all, replaces the choice, as `check --select` does: one that names
            # none of our codes (`--select E`) leaves no rule to run.
            select = _ours(options.select) if options.select is not None else None
            selection = selected_rules(config, select, _ours(options.extend_select), ())
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        cls._config = config
        cls._engine = Engine(selection.rules)
        cls._left_out = selection.left_out
        cls._projects = {}

    def _project(self, config: Config) -> ProjectModel:
        settings = ProjectSettings(Excluder([*config.exclude, *config.extend_exclude], config.root), config.data_parallel)  # type: ignore[arg-type]
        root = project_root(self._filename, settings)
        projects = type(self)._projects
        if root not in projects or root is None:
            projects[root] = project_model(root, [self._filename], settings, SummaryStore(None))
        return projects[root]

    def run(self) -> Iterator[tuple[int, int, str, Any]]:
        config, engine = type(self)._config, type(self)._engine
        assert config is not None and engine is not None, "flake8 calls parse_options before any check"
        result = engine.check_source(self._filename, "".join(self._lines).encode("utf-8"), self._project(config))
        skipped = (*config.ignored_at(self._filename), *type(self)._left_out)
        for d in result.diagnostics:
            # flake8 reports syntax errors itself (E999).
            if d.code != "PFL000" and not matches(d.code, skipped):
                yield d.line, d.column - 1, f"{d.code} {d.message}", type(self)
