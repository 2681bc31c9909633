"""Expected diagnostics are written in the checked source itself: `# expect: PFL101[, PFL201]`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pitfall_lint.engine import Engine
from pitfall_lint.rules import all_rules

REPO = Path(__file__).resolve().parents[1]
_EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>PFL\d{3}(?:\s*,\s*PFL\d{3})*)")
_EXPECT_AT_RUNTIME = re.compile(r"#\s*verify-expect:\s*(?P<codes>PFL\d{3}(?:\s*,\s*PFL\d{3})*)")


def _marks(source: str, pattern: re.Pattern[str]) -> set[tuple[str, int]]:
    found = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = pattern.search(line)
        if match:
            found.update((code.strip(), number) for code in match.group("codes").split(","))
    return found


def expected(source: str) -> set[tuple[str, int]]:
    """What the static check must report."""
    return _marks(source, _EXPECT)


def expected_at_runtime(source: str) -> set[tuple[str, int]]:
    """What only `verify` reports (rules without a static check)."""
    return _marks(source, _EXPECT_AT_RUNTIME)


def reported(source: str | bytes, path: str = "example.py") -> set[tuple[str, int]]:
    data = source.encode() if isinstance(source, str) else source
    result = Engine(all_rules()).check_source(path, data)
    assert result.internal_error is None, result.internal_error
    return {(d.code, d.line) for d in result.diagnostics}


def assert_marks(source: str) -> None:
    """The engine reports exactly the marked (code, line) pairs, and the source has marks or none by intent."""
    assert reported(source) == expected(source)


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    """Run the block with `folder` as the working folder, as a user checking from there would."""
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)
