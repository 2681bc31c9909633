"""Data flows one way: the per-file analyses (pitfall_lint/analysis/) know nothing of the project model
(pitfall_lint/project/), which is built on them; an import the other way, even one for type checking alone, is
the circle the model once made."""

from __future__ import annotations

import ast
from pathlib import Path

from marks import REPO

PACKAGE = REPO / "pitfall_lint"


def imported_modules(path: Path) -> list[str]:
    """Every module the file imports, anywhere in it (a function, `if TYPE_CHECKING:`), relative imports resolved."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found += [module, *(f"{module}.{alias.name}" for alias in node.names)]  # `from pitfall_lint import project`
    return found


def test_the_analyses_import_nothing_of_the_project_model() -> None:
    offending = [
        f"{path.relative_to(REPO)}: {module}"
        for path in sorted((PACKAGE / "analysis").rglob("*.py"))
        for module in imported_modules(path)
        if module == "pitfall_lint.project" or module.startswith("pitfall_lint.project.")
    ]
    assert offending == []

