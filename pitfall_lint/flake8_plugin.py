"""The rules as a flake8 plugin: `flake8 --select PFL` reports what `pitfall-lint check` reports."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from pitfall_lint import __version__
from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

_engine: Engine | None = None


def _default_engine() -> Engine:
    global _engine
    if _engine is None:
        _engine = Engine([rule for rule in all_rules() if rule.info.enabled_by_default])
    return _engine


class Flake8Plugin:
    name = "pitfall-lint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: list[str]) -> None:
        self._filename = filename
        self._lines = lines

    def run(self) -> Iterator[tuple[int, int, str, Any]]:
        result = _default_engine().check_source(self._filename, "".join(self._lines).encode("utf-8"))
        for d in result.diagnostics:
            if d.code != "PFL000":  # flake8 reports syntax errors itself (E999)
                yield d.line, d.column - 1, f"{d.code} {d.message}", type(self)
