"""The rule documents of `rules/`, shipped inside the wheel as `pitfall_lint/_docs`."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# An installed wheel carries the documents in the package; a source checkout has them beside it.
_LOCATIONS = (_PACKAGE / "_docs", _PACKAGE.parent / "rules")


def rule_document(code: str, name: str) -> str | None:
    for folder in _LOCATIONS:
        path = folder / f"{code}-{name}.md"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None
