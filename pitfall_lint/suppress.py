"""`# noqa` comments, with flake8's and ruff's meaning."""

from __future__ import annotations

import re

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)


def suppressed_codes(line: str) -> frozenset[str] | None:
    """None when the line has no noqa, an empty set for a bare `# noqa` (everything), else the codes."""
    if "noqa" not in line.lower():
        return None
    match = _NOQA.search(line)
    if match is None:
        return None
    codes = match.group("codes")
    return frozenset(c.upper() for c in _CODE.findall(codes)) if codes else frozenset()


def is_suppressed(code: str, line: str) -> bool:
    codes = suppressed_codes(line)
    return codes is not None and (not codes or code in codes)


def with_noqa(line: str, code: str) -> str | None:
    """The line (without its end) with `code` added to its `# noqa: ...` codes, else with `  # noqa: CODE` at its
    end; None where no comment can go: after a backslash that continues the line."""
    match = _NOQA.search(line) if "noqa" in line.lower() else None
    if match is not None and match.group("codes"):
        end = match.end("codes")
        return f"{line[:end]}, {code}{line[end:]}"
    code_part = line.rstrip()
    if code_part.endswith("\\"):
        return None
    return f"{code_part}  # noqa: {code}"
