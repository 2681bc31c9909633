"""The documentation as the tests read it: the README, which is the front page, and the pages of docs/."""

from __future__ import annotations

import re

from marks import REPO

DOCS = REPO / "docs"
# A fenced block: its language ('' for none) and its body.
FENCED_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def pages() -> dict[str, str]:
    """Each page's text by its path in the repository: README.md first, then docs/ in order."""
    paths = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
    return {path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8") for path in paths}


def page(path: str) -> str:
    return (REPO / path).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under a heading (`## pre-commit`), up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    body = text.split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n#{{1,{level}}} ", body, maxsplit=1)[0]


def sections(text: str) -> list[str]:
    """The page cut at each heading of level 1 to 3."""
    return re.split(r"\n(?=#{1,3} )", text)


def code_blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced blocks of that language ('' for a block with none)."""
    return [body for block_language, body in FENCED_BLOCK.findall(text) if block_language == language]
