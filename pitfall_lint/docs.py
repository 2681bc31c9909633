"""The rule documents of `rules/`, shipped inside the wheel as `pitfall_lint/_docs`."""

from __future__ import annotations

import re
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# An installed wheel carries the documents in the package; a source checkout has them beside it.
_LOCATIONS = (_PACKAGE / "_docs", _PACKAGE.parent / "rules")
_LIST_ITEM = re.compile(r"(?:[-*]|\d+\.) ")


def rule_document(code: str, name: str) -> str | None:
    for folder in _LOCATIONS:
        path = folder / f"{code}-{name}.md"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return None


def what_it_does(document: str) -> str | None:
    """The first paragraph under `## What it does`, with the list it introduces when it ends in a colon; a short
    description for where the whole document is too much (SARIF's fullDescription)."""
    _, heading, rest = document.partition("\n## What it does\n")
    blocks = rest.split("\n## ", 1)[0].strip().split("\n\n")
    if not heading or not blocks[0]:
        return None
    taken = blocks[:2] if blocks[0].endswith(":") and len(blocks) > 1 else blocks[:1]
    return "\n\n".join(_unwrapped(block) for block in taken)


def _unwrapped(block: str) -> str:
    """The block's lines joined as they read: a paragraph on one line, each item of a list on one line."""
    lines: list[str] = []
    for line in block.splitlines():
        if lines and not _LIST_ITEM.match(line):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    return "\n".join(lines)
